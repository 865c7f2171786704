"""SIGKILL at random moments while startups stream in: nothing lost, nothing recorded twice.

The state's promise (state.py) is that everything derived from the entries before the saved
cursor is committed in the same transaction as the cursor. If that holds, a daemon killed at any
instant and restarted ends with exactly what one uninterrupted pass over the journal gives.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import journaltools
import pytest
import standin_sglang
from sentinelproc import cli_stdout, free_port, popen_sentinel, stop, wait_until

# A unit name of its own: the cgroup and PID 1's invocation-id symlink that run_in_unit uses are
# per unit name and host-wide, so another root test session on the host cannot interfere.
UNIT = journaltools.unique_unit("sglang-crash")
SEED = 20260309
# `make soak` raises these (SENTINEL_SOAK_KILLS=100): the same test, ten times the kills.
MIN_KILLS = int(os.environ.get("SENTINEL_SOAK_KILLS", "10"))
MIN_STARTUPS = max(20, 2 * MIN_KILLS)
MAX_STARTUPS = 8 * MIN_STARTUPS  # bounds the run if kills come slowly
EXPECTED_MRR = {1: 48, 2: 26}
SPLIT_PAD = 200_000  # bytes added to a server_args line: 5 journald entries of 48 KiB


class Supervisor:
    """Runs `sentinel run` and restarts it after every kill, like systemd's Restart=always."""

    def __init__(self, args: list[str], log_dir: Path) -> None:
        self.args = args  # `sentinel ARGS`, the same for every incarnation
        self.log_dir = log_dir
        self.lock = threading.Lock()
        self.procs: list[subprocess.Popen[bytes]] = []
        self.kills = 0

    @property
    def current(self) -> subprocess.Popen[bytes]:
        return self.procs[-1]

    def start(self) -> None:
        err = self.log_dir / f"sentinel-{len(self.procs):03d}.stderr"
        self.procs.append(popen_sentinel(self.args, err))

    def kill_and_restart(self) -> None:
        with self.lock:
            proc = self.current
            if proc.poll() is not None:
                pytest.fail(f"sentinel exited by itself with {proc.returncode}")
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            self.kills += 1
            self.start()

    def stop_all(self) -> None:
        for proc in self.procs:
            stop(proc)

    def stderr(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.log_dir.glob("*.stderr")))


def state_rows(db_path: Path) -> dict[str, tuple[str, dict[str, object]]]:
    """invocation id -> (outcome, record) as committed so far; empty before the first commit."""
    if not db_path.exists():
        return {}
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=10)
    try:
        rows = db.execute("SELECT invocation_id, outcome, record FROM startups").fetchall()
    except sqlite3.OperationalError:  # the schema is not created yet
        return {}
    finally:
        db.close()
    return {inv: (outcome, json.loads(record)) for inv, outcome, record in rows}


@pytest.fixture
def supervisor(live_journald: journaltools.LiveJournald, tmp_path: Path) -> Iterator[Supervisor]:
    logs = tmp_path / "logs"
    logs.mkdir()
    sup = Supervisor(
        [
            "run",
            "--journal-dir",
            str(live_journald.journal_dir),
            "--state-dir",
            str(tmp_path / "state"),
            "--listen",
            f"127.0.0.1:{free_port()}",
            "--unit",
            UNIT,
        ],
        logs,
    )
    try:
        yield sup
    finally:
        sup.stop_all()


def test_sigkill_at_random_moments_loses_nothing_and_repeats_nothing(
    live_journald: journaltools.LiveJournald,
    supervisor: Supervisor,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """>= 20 startups, >= 10 SIGKILLs: each once, all ready, findings as one clean scan has them."""
    ids_rng, kill_rng = random.Random(SEED), random.Random(SEED + 1)
    state = tmp_path / "state"
    db_path = state / "sentinel.sqlite3"
    written: dict[str, int] = {}  # invocation id -> fixture startup (1 or 2)
    stop = threading.Event()
    errors: list[BaseException] = []

    def killer() -> None:
        try:
            while not stop.wait(kill_rng.uniform(0.2, 1.5)):
                supervisor.kill_and_restart()
        except BaseException as exc:  # surfaced in the main thread below
            errors.append(exc)

    supervisor.start()
    thread = threading.Thread(target=killer, name="killer", daemon=True)
    thread.start()
    try:
        while (len(written) < MIN_STARTUPS or supervisor.kills < MIN_KILLS) and not errors:
            assert len(written) < MAX_STARTUPS, f"only {supervisor.kills} kills"
            startup = 1 + len(written) % 2
            inv = f"{ids_rng.getrandbits(128):032x}"
            # Every third startup's server_args line is split by journald into 5 entries: a
            # kill may fall between its parts.
            pad = SPLIT_PAD if len(written) % 3 == 0 else 0
            standin_sglang.run(live_journald, startup, inv, unit=UNIT, delay_ms=1, pad=pad)
            written[inv] = startup
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not errors, errors
    kills = supervisor.kills

    # Let the last incarnation catch up, then stop it cleanly.
    def caught_up() -> bool:
        rows = state_rows(db_path)
        return set(rows) == set(written) and all(o == "ready" for o, _ in rows.values())

    wait_until(caught_up, 60, f"all {len(written)} startups ready in the state")
    # The state may be complete before the last incarnation (restarted by the killer just
    # before it stopped) has installed its SIGTERM handler; a SIGTERM then kills it (-15).
    last = supervisor.log_dir / f"sentinel-{len(supervisor.procs) - 1:03d}.stderr"
    wait_until(
        lambda: "sentinel_started" in last.read_text(errors="replace"),
        30,
        "the last incarnation started",
    )
    supervisor.current.send_signal(signal.SIGTERM)
    assert supervisor.current.wait(timeout=10) == 0
    logs = supervisor.stderr()
    assert "Traceback" not in logs
    assert '"level": "error"' not in logs

    # The state, straight from SQLite.
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    counts = db.execute("SELECT invocation_id, count(*) FROM startups GROUP BY 1").fetchall()
    assert sorted(inv for inv, _ in counts) == sorted(written)  # no extra, no synthetic ids
    assert {n for _, n in counts} == {1}
    for inv, outcome, record in db.execute("SELECT invocation_id, outcome, record FROM startups"):
        facts = json.loads(record)["facts"]
        assert (outcome, facts["max_running_requests"]) == ("ready", EXPECTED_MRR[written[inv]])
    resets = db.execute("SELECT value FROM counters WHERE name='cursor_resets'").fetchone()
    db.close()
    assert resets is None, "a SIGKILL must never lose the saved cursor's entry"

    # The CLI's view of the same state.
    out = cli_stdout(
        "startups", "--json", "--limit", "0", "--state-dir", str(state), "--unit", UNIT, timeout=60
    )
    listed = {s["invocation_id"]: s for s in json.loads(out)["startups"]}
    assert sorted(listed) == sorted(written)
    daemon_findings = {inv: [f["check"] for f in s["findings"]] for inv, s in listed.items()}
    for inv, checks in daemon_findings.items():
        assert len(checks) == len(set(checks)), f"duplicated finding in {inv}: {checks}"
        assert listed[inv]["facts"]["max_running_requests"] == EXPECTED_MRR[written[inv]]

    # One uninterrupted pass over the same journal into a fresh state is the reference.
    scan = cli_stdout(
        "scan",
        "--journal-dir",
        str(live_journald.journal_dir),
        "--state-dir",
        str(tmp_path / "fresh"),
        "--json",
        "--unit",
        UNIT,
        timeout=60,
    )
    reference = {
        s["invocation_id"]: [f["check"] for f in s["findings"]]
        for s in json.loads(scan)["startups"]
    }
    assert daemon_findings == reference
    # The split server_args lines (killed between parts or not) as whole as a scan has them.
    scanned = {s["invocation_id"]: s["server_args"] for s in json.loads(scan)["startups"]}
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    for inv, record in db.execute("SELECT invocation_id, record FROM startups"):
        assert json.loads(record)["server_args"] == scanned[inv], inv
    db.close()
    split = [inv for inv, args in scanned.items() if "sentinel_test_pad" in args]
    assert len(split) == (len(written) + 2) // 3
    assert all(len(scanned[inv]["sentinel_test_pad"]) == SPLIT_PAD // 7 for inv in split)
    total = sum(len(c) for c in reference.values())
    # Every startup 2 after a startup 1 regresses in the same three ways, and its PCG line is
    # new in the log (new_downgrade_message, info); nothing else does.
    assert total == 4 * sum(1 for s in written.values() if s == 2)
    with capsys.disabled():
        print(
            f"\n[crash] {len(written)} startups, {kills} SIGKILLs survived, "
            f"{len(supervisor.procs)} daemon processes, {total} findings"
        )
    assert kills >= MIN_KILLS
