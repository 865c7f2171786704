"""`sentinel run` following container and pod log files: woken by inotify, SIGKILLed during
rotations and restarted, its records equal to a scan's of the same files."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

from logfiles import Clock, DockerDir, PodDir, sglang_start
from sentinelproc import Sentinels, cli_stdout, wait_until

POD = "llm/sglang-0/server"
POD_UNIT = "k8s:" + POD
DOCKER_UNIT = "docker:sglang"


def startups(state: Path, *sel: str) -> list[tuple[str, str, str, Any]]:
    out = cli_stdout("startups", "--state-dir", str(state), "--json", *sel, timeout=60)
    return [
        (s["unit"], s["invocation_id"], s["outcome"], s["facts"]["max_running_requests"])
        for s in json.loads(out)["startups"]
    ]


def test_daemon_follows_files_through_kills_and_rotations(
    sentinels: Sentinels, tmp_path: Path
) -> None:
    rng = random.Random(2222)
    clock = Clock(int(time.time() * 1e6) - 3600 * 1_000_000)
    pods, docker, journal = tmp_path / "pods", tmp_path / "docker", tmp_path / "journal"
    journal.mkdir()
    pod = PodDir(pods, "llm", "sglang-0", "u1", clock)
    c = DockerDir(docker, "3" * 64, "sglang", clock)
    sel = ["--pod", POD, "--pod-logs", str(pods), "--container", "sglang"]
    sel += ["--docker-root", str(docker), "--journal-dir", str(journal)]
    state = tmp_path / "state"
    daemon = sentinels.start(*sel, state=state)
    kills = rotations = 0
    lags: list[float] = []
    for n in range(1, 4):
        mrr = 100 + n
        sglang_start(lambda t, n=n: pod.line("server", n, t), "2026-01-01", mrr, noise=3)
        half = rng.random() < 0.5
        if half:
            pod.rotate("server", n, f"20260101-1000{n:02d}", keep=10)
            c.rotate(max_file=20, compress=rng.random() < 0.5)
            rotations += 2
        written = time.monotonic()
        sglang_start(c.line, "2026-01-01", mrr, noise=3)
        if rng.random() < 0.6:
            time.sleep(rng.random() * 0.05)  # somewhere in reading what was just written
            daemon.proc.kill()
            daemon.proc.wait(timeout=10)
            kills += 1
            if not half:
                pod.rotate("server", n, f"20260101-1100{n:02d}", keep=10)
                c.rotate(max_file=20, compress=True)
                rotations += 2
            daemon = sentinels.start(*sel, state=state)
        else:
            want = f'sglang_sentinel_max_running_requests{{unit="{DOCKER_UNIT}"}} {mrr}.0'
            wait_until(daemon.scrape_with(want), 15, f"docker start {n} on /metrics")
            lags.append(time.monotonic() - written)
    for unit in (POD_UNIT, DOCKER_UNIT):
        want = f'sglang_sentinel_max_running_requests{{unit="{unit}"}} 103.0'
        wait_until(daemon.scrape_with(want), 15, f"the last start of {unit}")
    daemon.proc.kill()
    daemon.proc.wait(timeout=10)
    print(f"kills={kills} rotations={rotations} lags={[round(x, 3) for x in lags]}")
    # Shown when an assertion below fails (pytest prints the captured output): each run's log
    # and the files as they ended, to tell a line the daemon lost from one never written.
    for log in sorted(tmp_path.glob("sentinel-*.stderr"), key=lambda p: int(p.stem[9:])):
        print(f"--- {log.name}\n{log.read_text(errors='replace')}", end="")
    print("--- files:", sorted(p.name for p in c.dir.iterdir()))
    assert kills >= 1 and rotations >= 4
    followed = startups(state, *sel[:6])
    assert [(u, o, m) for u, _i, o, m in followed if u == POD_UNIT] == [
        (POD_UNIT, "ready", 100 + n) for n in range(1, 4)
    ]
    assert [(u, o, m) for u, _i, o, m in followed if u == DOCKER_UNIT] == [
        (DOCKER_UNIT, "ready", 100 + n) for n in range(1, 4)
    ]
    # A scan of the same files into a fresh state finds the same startups under the same ids
    # (each unit's in the same order; the two units' interleave as they were read).
    fresh = tmp_path / "scan"
    cli_stdout("scan", "--state-dir", str(fresh), "--json", *sel, timeout=60)
    scanned = startups(fresh, *sel[:6])
    for unit in (POD_UNIT, DOCKER_UNIT):
        assert [s for s in scanned if s[0] == unit] == [s for s in followed if s[0] == unit]
