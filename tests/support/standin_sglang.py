"""A stand-in SGLang server: prints one seed-fixture startup to stdout, line by line.

Run inside a unit's cgroup (`LiveJournald.run_in_unit`) its stdout becomes that unit's journal
entries, as a real `python -m sglang.launch_server` under systemd would produce them:

    python tests/support/standin_sglang.py --startup 1 [--delay-ms 3] [--decode N ...] [SGLang flags...]

Unknown arguments (e.g. `--tp-size 4 --api-key ...`) are accepted and ignored, so the process's
command line (journald's `_CMDLINE`) can look like SGLang's. PID 1's lines in the fixture
(Started/Stopping/Stopped/Deactivated/Consumed ...) are skipped: a stand-in is not PID 1.
`\\r` and `\\x1b` in the fixture are written as the real CR and ESC bytes.

As a systemd service (the end-to-end under a real PID 1, tests/e2e/), `--serve` keeps it up after
its last line until SIGTERM, as a ready server stays up; `--crash-after N --exit-code C` prints
only the first N lines and exits with status C, as a server that dies while starting.

`--hold` keeps the process alive after its last line until stdin reaches EOF. journald reads a
client's unit, invocation id and command line from /proc when it processes the client's first
line; a writer that has already exited by then loses them. `run()` holds the stand-in until
journald has stored every line under the right invocation id.

`--decode N` then prints N `Decode batch` lines whose gen throughput is unique per line
(`--decode-base + i`), `--decode-interval-ms` apart, and appends `i<TAB>time.time()` of each
write (taken right before the write) to `--write-times FILE`: the benchmark's marker lines.
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))  # the repository: journaltools reads tools/

import journaltools  # noqa: E402  (tests/support/ is not a package)

LOGS = {1: "startup-1-baseline.log", 2: "startup-2-flags-added.log"}
UNIT = journaltools.unique_unit("sglang-qwen")

# The fixture's PID-1 lines about the unit (systemd writes these, never the service).
_PID1 = re.compile(
    rb"^(Starting |Started |Stopping |Stopped |Failed to start )"
    rb"|^[\w@.:-]+\.service: (Deactivated successfully|Consumed |Failed with result"
    rb"|Main process exited)"
)

DECODE = (
    "[{when} TP0] Decode batch, #running-req: 3, #full token: 13520, full token usage: 0.03, "
    "mamba num: 6, mamba usage: 0.04, cuda graph: True, gen throughput (token/s): {value:.2f}, "
    "#queue-req: 0"
)


# journald's default LineMax: a longer line is stored as several entries of this many bytes.
LINE_MAX = 48 * 1024


def service_lines(startup: int, pad: int = 0) -> list[bytes]:
    """The fixture's lines for `startup` that the service itself prints (PID 1's removed).

    `pad` lengthens the server_args line by about that many bytes (a long `cuda_graph_bs`
    list before its closing bracket), so journald splits it into several entries.
    """
    path = journaltools.seed_fixture_dir() / LOGS[startup]
    lines = [raw for _, raw in journaltools.read_fixture_log(path) if not _PID1.match(raw)]
    if pad:
        extra = b", sentinel_test_pad=[" + b", ".join(b"%d" % i for i in range(pad // 7)) + b"]"
        lines = [
            raw[:-1] + extra + b")" if b"server_args=ServerArgs(" in raw else raw for raw in lines
        ]
    return lines


def entry_count(startup: int, pad: int = 0) -> int:
    """How many journal entries journald makes of `service_lines(startup, pad)`."""
    return sum(max(1, -(-len(raw) // LINE_MAX)) for raw in service_lines(startup, pad))


def _pause(seconds: float) -> None:
    if seconds > 0:
        time.sleep(seconds)  # pacing of the output itself, not synchronisation


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--startup", type=int, choices=sorted(LOGS), required=True)
    parser.add_argument("--delay-ms", type=float, default=3.0, help="pause between lines")
    parser.add_argument("--decode", type=int, default=0, help="marker decode lines after the log")
    parser.add_argument("--decode-base", type=float, default=10_000.0)
    parser.add_argument("--decode-interval-ms", type=float, default=30.0)
    parser.add_argument("--write-times", type=Path)
    parser.add_argument("--hold", action="store_true", help="exit only at EOF on stdin")
    parser.add_argument("--pad-server-args", type=int, default=0, help="lengthen server_args")
    parser.add_argument("--serve", action="store_true", help="stay up after the log until SIGTERM")
    parser.add_argument("--crash-after", type=int, metavar="N", help="exit after the first N lines")
    parser.add_argument("--exit-code", type=int, default=1, help="exit status with --crash-after")
    args, _sglang_flags = parser.parse_known_args(argv)

    out = sys.stdout.buffer
    delay = args.delay_ms / 1000
    lines = service_lines(args.startup, args.pad_server_args)
    if args.crash_after is not None:
        for raw in lines[: args.crash_after]:
            out.write(raw + b"\n")
        out.flush()
        return int(args.exit_code)
    for raw in lines:
        out.write(raw + b"\n")
        out.flush()
        _pause(delay)

    if args.decode:
        times = args.write_times.open("a", encoding="ascii") if args.write_times else None
        try:
            for i in range(args.decode):
                when = time.strftime("%Y-%m-%d %H:%M:%S")
                line = DECODE.format(when=when, value=args.decode_base + i).encode() + b"\n"
                t = time.time()
                out.write(line)
                out.flush()
                if times is not None:
                    times.write(f"{i}\t{t!r}\n")
                    times.flush()
                _pause(args.decode_interval_ms / 1000)
        finally:
            if times is not None:
                times.close()
    if args.hold:
        sys.stdin.buffer.read()
    if args.serve:
        # SIGTERM's default action ends the process, as systemctl stop expects.
        while True:
            signal.pause()
    return 0


def run(
    journald: journaltools.LiveJournald,
    startup: int,
    invocation_id: str,
    *,
    unit: str = UNIT,
    delay_ms: float = 2.0,
    argv: Sequence[str] = (),
    timeout: float = 60.0,
    pad: int = 0,
) -> None:
    """Run the stand-in as `unit`; return once journald has stored every line and it exited."""
    proc = journald.run_in_unit(
        unit,
        [
            sys.executable,
            str(Path(__file__)),
            "--startup",
            str(startup),
            "--delay-ms",
            str(delay_ms),
            "--hold",
            "--pad-server-args",
            str(pad),
            *argv,
        ],
        invocation_id=invocation_id,
        stdin=subprocess.PIPE,
    )
    assert proc.stdin is not None
    try:
        journald.wait_for_entries(
            entry_count(startup, pad), timeout, _SYSTEMD_INVOCATION_ID=invocation_id
        )
    finally:
        proc.stdin.close()
        code = proc.wait(timeout=timeout)
    if code != 0:
        raise journaltools.JournalToolError(f"stand-in for startup {startup} exited with {code}")


if __name__ == "__main__":
    raise SystemExit(main())
