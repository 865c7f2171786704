"""Live: the daemon follows a journald while the baseline decodes at one speed and the restarted
server 20 % slower; `decode_throughput_drop` shows on /metrics and arrives in a real Alertmanager.

The lines come from the simulation harness (bench/decode.py): Poisson arrivals, prefill inside
decode intervals, batch drift, context growth, idle gaps, noise. journald stamps them as they
arrive, so the policy's warm-up after ready is 0 s here (the stand-in writes a whole startup in
well under a second).
"""

from __future__ import annotations

import random
import secrets
import subprocess
import sys
import time
from pathlib import Path

import journaltools
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sentinelproc import Sentinels, wait_until
from test_alertmanager_e2e import Spawn, am_alerts, spawn, start_alertmanager, wait_for

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench import decode as sim  # noqa: E402

pytestmark = pytest.mark.slow
_ = spawn  # the fixture, imported for this module's tests
UNIT = journaltools.unique_unit("sglang-decode-live")  # unique to this test run
CAPTURE = "Capture cuda graph bs [1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80]"


def startup_lines(speed: float, seed: int) -> list[str]:
    now = time.strftime("%Y-%m-%d %H:%M:%S")
    lines = [
        f"[{now} TP0] {CAPTURE}",
        f"[{now} TP0] max_total_num_tokens=500000, chunked_prefill_size=8192, "
        "max_prefill_tokens=16384, max_running_requests=64, context_len=32768, "
        "available_gpu_mem=19.50 GB",
        f"[{now}] The server is fired up and ready to roll!",
    ]
    simulated = sim.simulate_lines(
        sim.Model(speed=speed, noise=0.03), 400, random.Random(seed), 0.012
    )
    lines += [f"[{now} TP0] {body}" for _, _, body in simulated.lines]
    return lines


def write_startup(
    journald: journaltools.LiveJournald, lines: list[str], tmp: Path, invocation: str
) -> None:
    path = tmp / f"{invocation}.lines"
    path.write_text("\n".join(lines) + "\n")
    proc = journald.run_in_unit(
        UNIT,
        [
            sys.executable,
            str(REPO / "tests" / "support" / "decode_standin.py"),
            str(path),
            "--hold",
        ],
        invocation_id=invocation,
        stdin=subprocess.PIPE,
    )
    assert proc.stdin is not None
    try:
        journald.wait_for_entries(len(lines), 60, _SYSTEMD_INVOCATION_ID=invocation)
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0


def samples(body: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def test_slower_restart_raises_decode_throughput_drop_on_metrics_and_in_alertmanager(
    live_journald: journaltools.LiveJournald, spawn: Spawn, tmp_path: Path
) -> None:
    am_url, am = start_alertmanager(spawn, tmp_path)
    config = tmp_path / "sentinel.yaml"
    config.write_text(
        f"units: [{UNIT}]\n"
        "alertmanager:\n"
        f"  urls: ['{am_url}']\n"
        "  resend_interval_seconds: 5\n"
        "policy:\n  checks:\n    decode_throughput_drop: {warmup_seconds: 0}\n"
        "log:\n  format: json\n"
    )
    sentinels = Sentinels(tmp_path)
    try:
        s = sentinels.start(
            "--config",
            str(config),
            "--journal-dir",
            str(live_journald.journal_dir),
            state=tmp_path / "state",
        )
        base_id, slow_id = secrets.token_hex(16), secrets.token_hex(16)
        write_startup(live_journald, startup_lines(1.0, 1), tmp_path, base_id)
        ratio = f'sglang_sentinel_decode_verdict{{unit="{UNIT}",verdict="inconclusive"}} 1.0'
        wait_until(s.scrape_with(ratio), 30, "the baseline's decode verdict on /metrics")
        write_startup(live_journald, startup_lines(0.8, 2), tmp_path, slow_id)
        regression = (
            f'sglang_sentinel_regression{{check="decode_throughput_drop",severity="warning",'
            f'unit="{UNIT}"}} 1.0'
        )
        body = wait_until(s.scrape_with(regression), 60, "decode_throughput_drop on /metrics")
        got = samples(body)
        unit = ("unit", UNIT)
        ratio_value = got[("sglang_sentinel_decode_throughput_ratio", frozenset({unit}))]
        assert 0.75 <= ratio_value <= 0.85
        assert (
            got[("sglang_sentinel_decode_verdict", frozenset({unit, ("verdict", "regressed")}))]
            == 1.0
        )
        assert got[("sglang_sentinel_decode_samples", frozenset({unit, ("side", "current")}))] >= 30
        [alert], _ = wait_for(
            "SGLangDecodeThroughputDropped pushed to Alertmanager",
            lambda: am_alerts(am_url, alertname="SGLangDecodeThroughputDropped", unit=UNIT),
            30.0,
            am,
        )
        assert alert["labels"]["check"] == "decode_throughput_drop"
        assert alert["labels"]["severity"] == "warning"
        assert "decode throughput at like load fell" in alert["annotations"]["summary"]
    finally:
        sentinels.stop_all()
