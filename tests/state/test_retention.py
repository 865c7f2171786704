"""Retention: stored startups are bounded per unit, a restart reads a bounded part of them, and
`startups` pages.

A crash loop writes a startup every few seconds for as long as nobody looks; the state, and what a
restart decodes, must not grow with it. `make soak` runs the crash-loop growth at full length
(SENTINEL_SOAK_STARTUPS=6000 through a daemon); the normal suite runs it with 30.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import subprocess
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from journaltools import (
    StartupScript,
    build_journal,
    read_fixture_log,
    ready_startup,
    seed_fixture_dir,
    seed_journal,
    write_export,
)
from sentinelproc import clean_env, free_port, sentinel_argv, wait_until

from sglang_sentinel.cli import main
from sglang_sentinel.state import DB_NAME, StateStore

UNIT = "sglang-qwen.service"
BOOT = "2026-01-01 00:00:00"
# The real server_args line of the seed fixture: it makes a crash-loop record as large as a real
# one (~14 kB), since a server that dies at once has logged its arguments first.
_SERVER_ARGS = next(
    raw
    for _, raw in read_fixture_log(seed_fixture_dir() / "startup-1-baseline.log")
    if b"server_args=ServerArgs(" in raw
)
SOAK_STARTUPS = int(os.environ.get("SENTINEL_SOAK_STARTUPS", "30"))


def _crash(start: datetime) -> StartupScript:
    """One startup of a crash loop: started, its arguments, a CUDA error, exit 1."""
    s = StartupScript(start=start, boot_at=BOOT)
    s.started(start)
    stamp = f"[{start + timedelta(seconds=1):%Y-%m-%d %H:%M:%S}]".encode()
    s.line(stamp + _SERVER_ARGS[_SERVER_ARGS.index(b"]") + 1 :])
    s.line(stamp + b" RuntimeError: CUDA error: out of memory")
    s.process_exited(1, when=start + timedelta(seconds=2))
    s.failed(when=start + timedelta(seconds=2))
    return s


def _crash_loop(tmp_path: Path, name: str, count: int, first: datetime) -> tuple[Path, list[str]]:
    """A journal of `count` crash-loop startups 10 s apart; returns it and their ids in order."""
    scripts = [_crash(first + timedelta(seconds=10 * i)) for i in range(count)]
    export = write_export((e for s in scripts for e in s.entries()), tmp_path / f"{name}.export")
    return build_journal(export, tmp_path / name), [s.invocation_id for s in scripts]


def _config(tmp_path: Path, kept: int) -> Path:
    path = tmp_path / "sentinel.yaml"
    path.write_text(f"units: [{UNIT}]\nstartups_kept_per_unit: {kept}\n", encoding="utf-8")
    return path


def _scan(config: Path, journal: Path, state: Path) -> None:
    args = ["scan", "--config", str(config), "--journal-dir", str(journal)]
    assert main([*args, "--state-dir", str(state), "--json"]) == 0


def _stored(state: Path) -> list[str]:
    db = sqlite3.connect(state / DB_NAME)
    try:
        return [r[0] for r in db.execute("SELECT invocation_id FROM startups ORDER BY seq")]
    finally:
        db.close()


def test_a_crash_loop_is_pruned_to_the_bound_keeping_the_pin_and_the_newest_ready(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """60 failed startups with a bound of 10: the 10 newest stay, plus the pinned baseline and
    the newest ready startup (the next startup's "previous"), and the file holds about them
    (pruned as each is stored, though a scan commits all 60 at once); a second scan of the same
    crash loop stores none of the pruned ones again and counts nothing twice."""
    config, state = _config(tmp_path, 10), tmp_path / "state"
    pinned = ready_startup("2026-01-02 10:00:00", 48)
    last_ready = ready_startup("2026-01-03 10:00:00", 40)
    good = write_export([*pinned.entries(), *last_ready.entries()], tmp_path / "good.export")
    _scan(config, build_journal(good, tmp_path / "good"), state)
    assert main(["baseline", "--pin", pinned.invocation_id[:8], "--state-dir", str(state)]) == 0
    loop, crashed = _crash_loop(tmp_path, "loop", 60, datetime(2026, 1, 4, tzinfo=timezone.utc))

    _scan(config, loop, state)
    kept = [pinned.invocation_id, last_ready.invocation_id, *crashed[-10:]]
    assert _stored(state) == kept
    size = (state / DB_NAME).stat().st_size
    assert size < 12 * 20_000 + 150_000, f"{size} bytes for 12 startups (~14 kB each)"
    _scan(config, loop, state)  # the same lines again: the pruned ones stay pruned
    assert _stored(state) == kept
    store = StateStore(state, readonly=True)
    try:
        assert store.outcome_counts(UNIT) == {"ready": 2, "failed": 60}
        assert store.baseline_id(UNIT) == pinned.invocation_id
        assert store.latest(UNIT, decided=True).invocation_id == crashed[-1]  # type: ignore[union-attr]
    finally:
        store.close()
    capsys.readouterr()
    main(["check", "--unit", UNIT, "--state-dir", str(state), "--json"])
    [latest] = json.loads(capsys.readouterr().out)["startups"]
    assert (latest["invocation_id"], latest["outcome"]) == (crashed[-1], "failed")


def test_a_crash_loop_longer_than_its_tombstones_is_counted_once_when_read_again(
    tmp_path: Path,
) -> None:
    """111 failed startups with a bound of 10 keep 100 tombstones: the oldest pruned startup has
    none left. Read again, it stayed pruned only by its tombstone before: it was stored anew
    (as the newest), which pruned the others and so on, and startups_total went 111 -> 222. The
    unit's horizon (the start of the newest startup deleted) keeps every one of them out."""
    config, state = _config(tmp_path, 10), tmp_path / "state"
    loop, crashed = _crash_loop(tmp_path, "loop", 111, datetime(2026, 1, 4, tzinfo=timezone.utc))
    _scan(config, loop, state)
    assert _stored(state) == crashed[-10:]
    _scan(config, loop, state)
    assert _stored(state) == crashed[-10:]
    store = StateStore(state, readonly=True)
    try:
        assert store.outcome_counts(UNIT) == {"ready": 0, "failed": 111}
    finally:
        store.close()
    # A newer startup is still stored and counted.
    newer, [late] = _crash_loop(tmp_path, "newer", 1, datetime(2026, 1, 5, tzinfo=timezone.utc))
    _scan(config, newer, state)
    assert _stored(state) == [*crashed[-9:], late]


def test_the_bound_is_a_config_key_with_a_floor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`startups_kept_per_unit` below 10 is refused with the key named, like any bad value."""
    assert main(["config", "--config", str(_config(tmp_path, 3))]) == 2
    assert (
        "sentinel.yaml: startups_kept_per_unit: must be a whole number from 10 to 10000000, got 3"
        in capsys.readouterr().err
    )


# -- what a restart reads -------------------------------------------------------------------------


def _rss_anon_at_ready(state: Path, journal: Path, config: Path | None = None) -> float:
    """Start `sentinel run` on `state`, wait for READY=1 on a NOTIFY_SOCKET, and return its
    RssAnon (MB) at that moment; then stop it."""
    address = str(state.parent / f"notify-{state.name}.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(address)
        sock.settimeout(0.5)
        args = ["run", "--journal-dir", str(journal), "--state-dir", str(state)]
        args += ["--listen", f"127.0.0.1:{free_port()}"]
        if config is not None:
            args += ["--config", str(config)]
        stderr = (state.parent / f"{state.name}.stderr").open("wb")
        proc = subprocess.Popen(
            sentinel_argv(*args),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=clean_env({"NOTIFY_SOCKET": address}),
        )
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if b"READY=1" in sock.recv(4096).split(b"\n"):
                        break
                except TimeoutError:
                    pass
                assert proc.poll() is None, (state.parent / f"{state.name}.stderr").read_text()
                assert time.monotonic() < deadline, "no READY=1 within 120 s"
            status = Path(f"/proc/{proc.pid}/status").read_text().splitlines()
            [kb] = [line.split()[1] for line in status if line.startswith("RssAnon:")]
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            stderr.close()
    return int(kb) / 1024


def _stored_copies(state: Path, journal: Path, count: int) -> None:
    """Scan `journal` into `state`, then store `count` more copies of its first record (new ids,
    older in journal order): a long history, made without reading a long journal."""
    assert main(["scan", "--journal-dir", str(journal), "--state-dir", str(state), "--json"]) == 0
    db = sqlite3.connect(state / DB_NAME)
    try:
        record, started, unit = db.execute(
            "SELECT record, started_at, unit FROM startups ORDER BY seq LIMIT 1"
        ).fetchone()
        doc = json.loads(record)
        rows = []
        for i in range(count):
            doc["invocation_id"] = inv = hashlib.md5(b"%d" % i).hexdigest()
            doc["outcome"] = "failed" if i % 2 else "ready"
            rows.append(
                (inv, unit, started - count + i, doc["outcome"], json.dumps(doc), -count + i)
            )
        with db:
            db.executemany(
                "INSERT INTO startups (invocation_id, unit, started_at, outcome, record, builder,"
                " updated_at, seq) VALUES (?, ?, ?, ?, ?, NULL, 0, ?)",
                rows,
            )
    finally:
        db.close()


@pytest.fixture(scope="module")
def seed_rss(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    """The seed journal, and RssAnon (MB) at READY=1 of a daemon on its 2 startups: the base
    the memory tests compare with (one start for the module, measured on this machine)."""
    tmp = tmp_path_factory.mktemp("seed-rss")
    journal = seed_journal(tmp)
    _stored_copies(tmp / "state", journal, 0)
    return journal, _rss_anon_at_ready(tmp / "state", journal)


def test_memory_at_ready_does_not_grow_with_the_stored_history(
    tmp_path: Path, seed_rss: tuple[Path, float]
) -> None:
    """RssAnon at READY=1 with 2,000 stored startups is within 15 MB of that with the seed's 2
    (before: every record was decoded at start, ~38 kB each: 2,000 cost ~75 MB)."""
    journal, small = seed_rss
    _stored_copies(tmp_path / "many", journal, 2000)
    large = _rss_anon_at_ready(tmp_path / "many", journal)
    assert large - small < 15, f"RssAnon at READY: {small:.1f} MB with 2, {large:.1f} MB with 2,002"


def test_startups_pages_newest_first_with_a_next_page(
    tmp_path: Path, seed_journal_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`startups` shows the newest 50 by default; `--limit`/`--before` walk back page by page,
    and the JSON names the next page's `--before` (null on the last page)."""
    state = tmp_path / "s"
    _stored_copies(state, seed_journal_dir, 118)  # 120 in all
    ids = _stored(state)
    capsys.readouterr()

    def page(*args: str) -> dict[str, object]:
        assert main(["startups", "--state-dir", str(state), "--json", *args]) == 0
        return dict(json.loads(capsys.readouterr().out))

    def shown(doc: dict[str, object]) -> list[str]:
        return [s["invocation_id"] for s in doc["startups"]]  # type: ignore[attr-defined]

    first = page()
    assert (shown(first), first["next_before"]) == (ids[-50:], ids[-50])
    second = page("--before", ids[-50][:12], "--limit", "60")
    assert (shown(second), second["next_before"]) == (ids[-110:-50], ids[-110])
    last = page("--before", ids[-110], "--limit", "60")
    assert (shown(last), last["next_before"]) == (ids[:10], None)
    assert shown(page("--limit", "0")) == ids
    assert main(["startups", "--state-dir", str(state), "--limit", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line[:12] for line in lines[:2]] == [i[:12] for i in ids[-2:]]
    assert lines[2:] == [f"(older startups: sentinel startups --before {ids[-2][:12]})"]


# -- the crash-loop growth (`make soak`: 6,000 startups) ------------------------------------------


def test_a_daemon_through_a_crash_loop_keeps_the_state_and_its_restart_bounded(
    tmp_path: Path, seed_rss: tuple[Path, float]
) -> None:
    """SENTINEL_SOAK_STARTUPS crash-loop startups (30 here, 6,000 in `make soak`) through
    `sentinel run` with a bound of one sixth of them (1,000 for the soak: the default): every
    one is counted; the state holds the bound (+2 kept ones) and stays under 20 kB a kept
    startup + 2 MB (before: 16.7 kB for every startup ever, 99.5 MB at 6,000); RssAnon at a
    restart's READY=1 is within 15 MB of a daemon's on the seed's 2 startups (before: 213.6 MB)."""
    count, kept = SOAK_STARTUPS, max(10, SOAK_STARTUPS // 6)
    config = _config(tmp_path, kept)
    loop, crashed = _crash_loop(tmp_path, "loop", count, datetime(2026, 1, 4, tzinfo=timezone.utc))
    empty = seed_rss[1]

    state = tmp_path / "state"
    port = free_port()
    stderr = (tmp_path / "run.stderr").open("wb")
    args = ["run", "--config", str(config), "--journal-dir", str(loop), "--state-dir", str(state)]
    proc = subprocess.Popen(
        sentinel_argv(*args, "--listen", f"127.0.0.1:{port}"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        env=clean_env(),
    )
    counted = f'sglang_sentinel_startups_total{{outcome="failed",unit="{UNIT}"}} {count}.0'
    try:
        wait_until(
            lambda: counted in _scrape(port),
            60 + count / 20,
            f"{count} failed startups counted",
            step=0.5,
        )
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        stderr.close()
    assert _stored(state) == crashed[-kept:]
    size = (state / DB_NAME).stat().st_size
    assert size < kept * 20_000 + 2_000_000, f"state {size / 1e6:.1f} MB for {kept} kept"
    restart = _rss_anon_at_ready(state, loop, config)
    assert restart - empty < 15, f"RssAnon at READY {restart:.1f} MB, seed state {empty:.1f} MB"
    print(  # the soak's numbers, seen with -s
        f"\ncrash loop of {count}: {len(crashed[-kept:])} kept, state {size / 1e6:.1f} MB,"
        f" RssAnon at READY {restart:.1f} MB (seed state {empty:.1f} MB)"
    )


def _scrape(port: int) -> str:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            return str(r.read().decode())
    except (urllib.error.URLError, OSError):
        return ""
