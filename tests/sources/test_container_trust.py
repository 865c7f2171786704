"""A container's lines count only when dockerd sent them: CONTAINER_NAME is a client's field.

Any local process can write `CONTAINER_NAME=<watched>` (`logger --journald`, sd_journal_send).
Before, such a process made a new "startup" of the container (max_running_requests 26 -> 48 on
/metrics, `check` 1 -> 0). Now the fields journald adds from the sender (`_UID`, `_SYSTEMD_UNIT`,
`_COMM`, `_TRANSPORT`) must say root dockerd in its unit; anything else is counted and ignored.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from dockerjournal import Container, DockerHost
from journaltools import ExportValue, LiveJournald, build_journal, unique_unit, write_export
from sentinelproc import scrape_in_process

from sglang_sentinel.cli import main
from sglang_sentinel.state import StateStore

NAME = "sgl-trust-qwen"
TARGET = f"docker:{NAME}"


def sglang_start(c: Container, day: str, mrr: int) -> Container:
    """One SGLang start in the container: server_args, the capacity summary, ready."""
    c.start()
    c.line(
        f"[{day} 10:00:01] server_args=ServerArgs(model_path='/m/Qwen3-8B', tp_size=1)",
        f"{day} 10:00:01",
    )
    c.line(summary(day, mrr), when=f"{day} 10:00:50")
    c.line(f"[{day} 10:00:55] The server is fired up and ready to roll!", when=f"{day} 10:00:55")
    return c


def summary(day: str, mrr: int) -> str:
    return (
        f"[{day} 10:00:50 TP0] max_total_num_tokens=400000, chunked_prefill_size=8192, "
        f"max_prefill_tokens=16384, max_running_requests={mrr}, context_len=40960, "
        "available_gpu_mem=20.00 GB"
    )


def journal(tmp_path: Path, entries: list[dict[str, ExportValue]]) -> Path:
    ordered = sorted(entries, key=lambda e: int(e["__REALTIME_TIMESTAMP"]))
    return build_journal(write_export(ordered, tmp_path / "j.export"), tmp_path / "journal")


def verdict(tmp_path: Path, jdir: Path, *config: str) -> tuple[list[int], int]:
    """(max_running_requests of each stored startup, `sentinel check`'s exit code)."""
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"containers: [{NAME}]\n" + "".join(line + "\n" for line in config))
    common = ["--config", str(cfg), "--state-dir", str(tmp_path / "state")]
    assert main(["scan", "--journal-dir", str(jdir), *common]) in (0, 1)
    store = StateStore(tmp_path / "state", readonly=True)
    try:
        mrr = [int(str(r.facts["max_running_requests"])) for r in store.startups([TARGET])]
    finally:
        store.close()
    return mrr, main(["check", *common])


def logged_events(err: str) -> list[dict[str, Any]]:
    """The structlog events a command wrote (JSON lines on stderr, not a terminal)."""
    return [json.loads(line) for line in err.splitlines() if line.startswith("{")]


# Each sender differs from dockerd in one field journald adds itself; all but another-unit
# share dockerd's cgroup, hence its invocation id (a child of dockerd, an ExecStartPost script).
SENDERS: dict[str, dict[str, str | None]] = {
    "non-root": {"_UID": "1000", "_GID": "1000"},
    "another-unit": {
        "_SYSTEMD_INVOCATION_ID": "0123456789abcdef0123456789abcdef",
        "_SYSTEMD_UNIT": "cron.service",
        "_SYSTEMD_CGROUP": "/system.slice/cron.service",
    },
    "not-dockerd": {"_COMM": "python3", "_EXE": "/usr/bin/python3.11"},
    # A root process in dockerd's unit that named itself dockerd (prctl PR_SET_NAME).
    "renamed-to-dockerd": {"_EXE": "/usr/bin/python3.11"},
    "no-binary": {"_EXE": None},
    "not-native": {"_TRANSPORT": "syslog"},
}


@pytest.mark.parametrize("sender", list(SENDERS))
def test_a_forged_startup_and_a_forged_line_in_a_real_start_change_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, sender: str
) -> None:
    """48 then 26 from dockerd (a finding, check 1); then a forged summary line inside the 26
    start (same epoch, right after one of its lines: the reader's fast path) and a forged whole
    start at 48: both ignored, counted, logged once; the verdict stays 1."""
    host = DockerHost()
    c = host.container(NAME)
    sglang_start(c, "2026-01-01", 48)
    real = sglang_start(c, "2026-01-02", 26)
    forged_at = len(host.entries)
    # Into the real 26 start, right after its server_args line: a summary saying 48.
    forged_line = dict(host.entries[-3])
    forged_line["MESSAGE"] = summary("2026-01-02", 48)
    forged_line["__REALTIME_TIMESTAMP"] = str(int(str(forged_line["__REALTIME_TIMESTAMP"])) + 1)
    host.entries.append(forged_line)
    sglang_start(host.container(NAME), "2026-01-03", 48)  # a whole new "start"
    for entry in host.entries[forged_at:]:
        for name, value in SENDERS[sender].items():
            if value is None:
                entry.pop(name, None)  # a field journald did not add
            else:
                entry[name] = value
        entry["_PID"] = "4242"
    forged = len(host.entries) - forged_at
    assert forged == 4 and real.epoch == forged_line["CONTAINER_LOG_EPOCH"]
    jdir = journal(tmp_path, host.entries)

    assert verdict(tmp_path, jdir) == ([48, 26], 1)
    [logged] = [
        e for e in logged_events(capsys.readouterr().err) if e["event"] == "forged_entry_ignored"
    ]
    assert logged["target"] == TARGET and logged["pid"] == "4242"

    # Counted and exported.
    text = scrape_in_process(jdir, tmp_path / "s2", containers=[NAME])
    assert f"sglang_sentinel_forged_entries_total {float(forged)}\n" in text
    assert f'sglang_sentinel_max_running_requests{{unit="{TARGET}"}} 26.0\n' in text


def test_the_engine_unit_is_configurable_and_only_it_is_trusted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """dockerd under another unit (`docker_units`) is trusted there, and docker.service no more."""
    host = DockerHost()
    c = host.container(NAME)
    sglang_start(c, "2026-01-01", 48)
    sglang_start(c, "2026-01-02", 26)
    for entry in host.entries:
        entry["_SYSTEMD_UNIT"] = "docker-gpu.service"
    jdir = journal(tmp_path, host.entries)
    assert verdict(tmp_path, jdir, "docker_units: [docker-gpu]") == ([48, 26], 1)
    capsys.readouterr()
    # With the default docker_units the same lines are not dockerd's: nothing is recorded.
    scan = ["scan", "--journal-dir", str(jdir), "--container", NAME, "--json"]
    assert main([*scan, "--state-dir", str(tmp_path / "s3")]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {"startups": []}
    assert [e["reason"] for e in logged_events(err) if e["event"] == "forged_entry_ignored"] == [
        "sent from docker-gpu.service, not from docker.service or snap.docker.dockerd.service"
    ]


# --- a live journald: the senders are real processes, the trusted fields journald's own --------

# Sends the entries (a JSON list of field maps, the first line of stdin) over journald's native
# protocol, as dockerd's journald driver does, named `dockerd` (prctl PR_SET_NAME); then stays
# alive until stdin closes, so that journald reads its /proc entry (unit, comm) while it lives.
SENDER = r"""
import ctypes, json, socket, struct, sys
ctypes.CDLL(None).prctl(15, b"dockerd", 0, 0, 0)
entries = json.loads(sys.stdin.readline())
with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
    for fields in entries:
        data = b"".join(
            name.encode() + b"\n" + struct.pack("<Q", len(value.encode())) + value.encode() + b"\n"
            for name, value in fields.items()
        )
        sock.sendto(data, sys.argv[1])
sys.stdin.read()
"""


def client_fields(entries: list[dict[str, ExportValue]]) -> list[dict[str, str]]:
    """What a client sends: every field but those journald adds (`_*`, `__*`)."""
    return [{k: str(v) for k, v in e.items() if not k.startswith("_")} for e in entries]


def send(
    live: LiveJournald, proc: subprocess.Popen[bytes], entries: list[dict[str, str]], total: int
) -> None:
    """Hand `proc` its entries, wait until the journal holds `total` container lines, let it go."""
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(entries).encode() + b"\n")
    proc.stdin.flush()
    live.wait_for_entries(total, timeout=20, CONTAINER_NAME=NAME)
    proc.stdin.close()
    assert proc.wait(timeout=20) == 0


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
# What `nobody` runs the sender with: the distribution's python3. A pyenv build of 3.10, 3.12
# or 3.13 (scripts/test-pythons.sh) finds its libpython under /root only as root, so as nobody
# it never started and the test waited for lines that were never sent.
NOBODY_PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def test_live_forged_lines_of_non_root_processes_change_no_verdict(
    live_journald: LiveJournald, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """dockerd (root, in its unit, a binary named dockerd) writes 48 then 26: check 1. Then
    `nobody` writes a start at 48, once from outside any unit and once from inside dockerd's
    unit, and root from inside dockerd's unit, all named dockerd: still 48, 26 and check 1; the
    forged lines are counted."""
    engine = unique_unit("sentinel-dockerd")
    sender = [sys.executable, "-c", SENDER, str(live_journald.native_socket)]
    # The stand-in engine's binary is called dockerd (_EXE): the distribution's python3, copied.
    binary = tmp_path / "bin" / "dockerd"
    binary.parent.mkdir()
    shutil.copy(Path(NOBODY_PYTHON).resolve(), binary)
    host = DockerHost()
    c = host.container(NAME)
    sglang_start(c, "2026-01-01", 48)
    sglang_start(c, "2026-01-02", 26)
    real = client_fields(host.entries)
    dockerd = live_journald.run_in_unit(engine, [str(binary), *sender[1:]], stdin=subprocess.PIPE)
    send(live_journald, dockerd, real, len(real))

    forged = client_fields(sglang_start(host.container(NAME), "2026-01-03", 48).host.entries[-3:])
    forger = [*NOBODY, NOBODY_PYTHON, *sender[1:]]
    outsider = subprocess.Popen(forger, stdin=subprocess.PIPE)
    send(live_journald, outsider, forged, len(real) + 3)
    insider = live_journald.run_in_unit(engine, forger, stdin=subprocess.PIPE)
    send(live_journald, insider, forged, len(real) + 6)
    # Root in dockerd's unit, named dockerd by prctl, but another binary.
    renamed = live_journald.run_in_unit(engine, sender, stdin=subprocess.PIPE)
    send(live_journald, renamed, forged, len(real) + 9)

    lines = live_journald.entries(CONTAINER_NAME=NAME)
    senders = [
        (e["_UID"], e.get("_SYSTEMD_UNIT"), e["_COMM"], e["_EXE"].endswith(b"/dockerd"))
        for e in lines
    ]
    unit = engine.encode()
    assert (
        senders
        == [(b"0", unit, b"dockerd", True)] * 6
        + [(b"65534", None, b"dockerd", False)] * 3
        + [(b"65534", unit, b"dockerd", False)] * 3
        + [(b"0", unit, b"dockerd", False)] * 3
    )
    jdir = live_journald.journal_dir
    assert verdict(tmp_path, jdir, f"docker_units: [{engine}]") == ([48, 26], 1)
    text = scrape_in_process(jdir, tmp_path / "s2", containers=[NAME], docker_units=[engine])
    assert "sglang_sentinel_forged_entries_total 9.0\n" in text
    assert f'sglang_sentinel_max_running_requests{{unit="{TARGET}"}} 26.0\n' in text
