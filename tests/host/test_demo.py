"""`make demo`'s container case: demo/docker and demo/pods are demo/journal.export's startups
(tools/demo_files.py), scanned and reported like the journal's, and followed by `sentinel run`."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from sentinelproc import free_port, wait_until

from tools import demo_files

REPO = Path(__file__).resolve().parents[2]
DOCKER, K8S = "docker:sglang-qwen", "k8s:default/sglang-qwen/sglang"
NEW_POD = demo_files.PODS[1][0]


def demo_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The demo run with this interpreter on this checkout (scripts/demo.sh's DEMO_SENTINEL)."""
    wrapper = tmp_path / "sentinel"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -m sglang_sentinel.cli "$@"\n')
    wrapper.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTIFY_", "WATCHDOG_"))}
    env.pop("SENTINEL_STATE_DIR", None)
    return {**env, "DEMO_SENTINEL": str(wrapper), "PYTHONPATH": str(REPO), **extra}


def test_demo_files_are_the_demo_journal_in_both_layouts() -> None:
    assert demo_files.main(["--check"]) == 0
    want = demo_files.files()
    assert sorted(str(p) for p in want) == sorted(
        str(p.relative_to(demo_files.DEMO))
        for top in ("docker", "pods")
        for p in (demo_files.DEMO / top).rglob("*")
        if p.is_file()
    )
    first, second = demo_files.startups((demo_files.DEMO / "journal.export").read_bytes())
    assert (len(first), len(second)) == (105, 101)  # the unit's own lines; none of PID 1's
    assert not any(m.startswith((b"Started ", b"Stopping ")) for _t, m in first + second)


def test_the_check_fails_on_a_changed_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    demo = tmp_path / "demo"
    shutil.copytree(demo_files.DEMO, demo)
    monkeypatch.setattr(demo_files, "DEMO", demo)
    (log,) = (demo / "pods").glob(f"default_{NEW_POD}_*/sglang/0.log")
    log.write_bytes(
        log.read_bytes().replace(b"max_running_requests=26", b"max_running_requests=48")
    )
    assert demo_files.main(["--check"]) == 1
    assert demo_files.main([]) == 0  # regenerates
    assert demo_files.main(["--check"]) == 0


def second_startup(report: str, target: str) -> str:
    """The report's block of `target`'s second startup (compared with its first)."""
    (block,) = [
        b
        for b in report.split("\n\n")
        if b.startswith(target + "  startup ") and "vs previous ready startup" in b
    ]
    return block + "\n"


def test_demo_reports_the_container_case_like_the_journal_case_and_follows_all(
    tmp_path: Path,
) -> None:
    """`make demo` as written (one run: its scans take most of the time): the container case's
    two targets report what the journal's unit does, then the daemon serves all three."""
    port = free_port()
    with (tmp_path / "demo.stderr").open("wb") as stderr, (tmp_path / "demo.out").open("wb") as out:
        proc = subprocess.Popen(
            ["bash", "scripts/demo.sh"],
            cwd=REPO,
            env=demo_env(tmp_path, DEMO_LISTEN=f"127.0.0.1:{port}"),
            stdout=out,
            stderr=stderr,
            start_new_session=True,  # its own process group: Ctrl-C below reaches the daemon
        )
    want = [
        'sglang_sentinel_max_running_requests{unit="sglang-qwen.service"} 26.0',
        f'sglang_sentinel_max_running_requests{{unit="{DOCKER}"}} 26.0',
        f'sglang_sentinel_max_running_requests{{unit="{K8S}"}} 26.0',
        f'sglang_sentinel_pod_info{{k8s_pod="{NEW_POD}",unit="{K8S}"}} 1.0',
    ]

    def scraped() -> str | None:
        if proc.poll() is not None:
            log = (tmp_path / "demo.stderr").read_text()[-2000:]
            pytest.fail(f"the demo ended before serving /metrics:\n{log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                page: str = r.read().decode()
        except OSError:
            return None
        return page if all(w in page for w in want) else None

    try:
        page = wait_until(scraped, 60, "the three targets' second startups on /metrics")
        assert [line for line in page.splitlines() if "sglang_sentinel_pod_info{" in line] == [
            want[-1]
        ]
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        report = (tmp_path / "demo.out").read_text()
        headers = [
            line.split("  startup ")[0] for line in report.splitlines() if "  startup " in line
        ]
        unit = "sglang-qwen.service"
        assert sorted(headers) == sorted([unit, unit, DOCKER, K8S, DOCKER, K8S])
        for target in (unit, DOCKER, K8S):
            second = second_startup(report, target)
            assert "  CRITICAL  max_running_requests 48 → 26 (−46 %)\n" in second
            assert "  WARNING   KV cache tokens 507050 → 277552 (−45 %)\n" in second
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
