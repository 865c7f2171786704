"""The demo's container case, generated from its journal: `python -m tools.demo_files [--check]`.

demo/journal.export holds two startups of sglang-qwen.service (tests/fixtures/seed-flag-change).
This writes the same SGLang lines, with the same times, as the two other places SGLang's own
recipes leave them (docs: README "Containers", "Kubernetes"):

- demo/docker/containers/ID/: Docker's json-file log of a container named `sglang-qwen`, as
  moby's jsonfilelog driver writes it (`{"log":"...\\n","stream":"stderr","time":"..."}`, a
  line over 16 KiB in pieces whose `log` lacks the newline). The restart with the new flags
  appends to the same file (its next `server_args=` line starts startup 2).
- demo/pods/: the kubelet's pod logs of a Deployment `sglang-qwen` (namespace `default`,
  container `sglang`) in the CRI format (`<time> stderr F <line>`, `P` pieces past 16 KiB).
  Startup 2 is a rollout: a new pod (another ReplicaSet hash, suffix and uid), `0.log` in each;
  the kubelet rotated the new pod's log once (`0.log.<YYYYMMDD-HHMMSS>`).

Only the unit's own lines are taken (not PID 1's or other units'): a container has no systemd
around it. `make check` runs `--check`, which fails when the files differ from the journal.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import struct
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "demo"
UNIT = "sglang-qwen.service"
CONTAINER = "sglang-qwen"
CONTAINER_ID = hashlib.sha256(b"sglang-sentinel demo: sglang-qwen").hexdigest()
NAMESPACE, DEPLOYMENT, POD_CONTAINER = "default", "sglang-qwen", "sglang"
# (pod name, uid): a Deployment's pods, `<deployment>-<ReplicaSet hash>-<suffix>`.
PODS = (
    ("sglang-qwen-7d9f8b6c4d-x2kqz", "4f3c2b1a-0d9e-4c8b-a7f6-1e2d3c4b5a60"),
    ("sglang-qwen-5f6d7c8b9-w4ml2", "9a8b7c6d-5e4f-4a3b-b2c1-d0e9f8a7b6c5"),
)
PIECE = 16 * 1024  # moby's copier buffer and containerd's max_container_log_line_size


def parse_export(data: bytes) -> list[dict[str, bytes]]:
    """Parse Journal Export Format (as `journalctl -o export` prints it) into raw field dicts.

    The binary form of a field included; tests/support/journaltools.py uses this one too.
    """
    entries: list[dict[str, bytes]] = []
    current: dict[str, bytes] = {}
    pos = 0
    while pos < len(data):
        end = data.index(b"\n", pos)
        line = data[pos:end]
        if not line:
            if current:
                entries.append(current)
                current = {}
            pos = end + 1
        elif b"=" in line:
            key, _, value = line.partition(b"=")
            current[key.decode("ascii")] = value
            pos = end + 1
        else:
            (size,) = struct.unpack("<Q", data[end + 1 : end + 9])
            current[line.decode("ascii")] = data[end + 9 : end + 9 + size]
            pos = end + 9 + size + 1
    if current:
        entries.append(current)
    return entries


def startups(export: bytes) -> list[list[tuple[int, bytes]]]:
    """The unit's own lines, (realtime µs, MESSAGE), one list per invocation, in order."""
    out: dict[bytes, list[tuple[int, bytes]]] = {}
    for e in parse_export(export):
        if e.get("_SYSTEMD_UNIT") != UNIT.encode() or e.get("_PID") == b"1" or "UNIT" in e:
            continue
        out.setdefault(e["_SYSTEMD_INVOCATION_ID"], []).append(
            (int(e["__REALTIME_TIMESTAMP"]), e["MESSAGE"])
        )
    return [sorted(lines) for lines in out.values()]


def rfc3339(us: int, nanos: int = 0) -> str:
    """RFC 3339 with nanoseconds, UTC, as Docker and containerd write it."""
    dt = datetime.fromtimestamp(us // 1_000_000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + f".{us % 1_000_000:06d}{nanos:03d}Z"


def pieces(message: bytes) -> list[tuple[bytes, bool]]:
    """The line as the engines write it: 16 KiB pieces, (piece, last)."""
    chunks = [message[at : at + PIECE] for at in range(0, max(len(message), 1), PIECE)]
    return [(c, i == len(chunks) - 1) for i, c in enumerate(chunks)]


def json_file(lines: Sequence[tuple[int, bytes]]) -> bytes:
    out = []
    for us, message in lines:
        for n, (piece, last) in enumerate(pieces(message)):
            text = piece.decode("utf-8", "surrogateescape") + ("\n" if last else "")
            record = {"log": text, "stream": "stderr", "time": rfc3339(us, n)}
            # moby's compact form, its field order (jsonlog.JSONLogs.MarshalJSONBuf)
            out.append(json.dumps(record, separators=(",", ":")).encode() + b"\n")
    return b"".join(out)


def cri(lines: Sequence[tuple[int, bytes]]) -> bytes:
    out = []
    for us, message in lines:
        for n, (piece, last) in enumerate(pieces(message)):
            out.append(f"{rfc3339(us, n)} stderr {'F' if last else 'P'} ".encode() + piece + b"\n")
    return b"".join(out)


def files() -> dict[Path, bytes]:
    """Every generated file, by path under demo/."""
    first, second = startups((DEMO / "journal.export").read_bytes())
    cdir = Path("docker", "containers", CONTAINER_ID)
    config = {
        "ID": CONTAINER_ID,
        "Name": "/" + CONTAINER,
        "Config": {"Image": "lmsysorg/sglang:v0.5.10rc0-cu129"},
        "HostConfig": {"LogConfig": {"Type": "json-file", "Config": {}}},
    }
    out = {
        cdir / "config.v2.json": json.dumps(config, indent=1).encode() + b"\n",
        cdir / f"{CONTAINER_ID}-json.log": json_file(first) + json_file(second),
    }
    for (pod, uid), lines in zip(PODS, (first, second), strict=True):
        logs = Path("pods", f"{NAMESPACE}_{pod}_{uid}", POD_CONTAINER)
        if lines is second:
            half = len(lines) // 2
            stamp = datetime.fromtimestamp(lines[half][0] // 1_000_000, tz=timezone.utc)
            out[logs / f"0.log.{stamp:%Y%m%d-%H%M%S}"] = cri(lines[:half])
            out[logs / "0.log"] = cri(lines[half:])
        else:
            out[logs / "0.log"] = cri(lines)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.demo_files", description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if the files are out of date")
    args = parser.parse_args(argv)
    want = files()
    have = {
        p.relative_to(DEMO): p.read_bytes()
        for top in ("docker", "pods")
        for p in sorted((DEMO / top).rglob("*"))
        if p.is_file()
    }
    if args.check:
        if have != want:
            differ = sorted(str(p) for p in set(have) | set(want) if have.get(p) != want.get(p))
            print(
                f"demo/: {', '.join(differ)} differ from demo/journal.export; "
                "run `make demo-files`",
                file=sys.stderr,
            )
            return 1
        return 0
    for path in set(have) - set(want):
        (DEMO / path).unlink()
    for path, data in want.items():
        (DEMO / path).parent.mkdir(parents=True, exist_ok=True)
        (DEMO / path).write_bytes(data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
