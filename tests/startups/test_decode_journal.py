"""Decode at like load and the new startup signals on real journal files (`sentinel scan`).

Three startups of one unit, built in journal export format and turned into a journal by
systemd-journal-remote: a baseline, a restart that decodes 20 % slower at like load (the
simulation harness's lines, bench/decode.py), starts 140 s slower, admits more requests than
its largest captured CUDA graph and runs a quarter of its decode lines eager; then a start that
dies with the no-KV-memory error.
"""

from __future__ import annotations

import json
import random
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from journaltools import StartupScript, build_journal

from sglang_sentinel.cli import main

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench import decode as sim  # noqa: E402

UNIT = "sglang-decode-test.service"
BASE_ID = "a1" * 16
SLOW_ID = "b2" * 16
DEAD_ID = "c3" * 16
CAPTURE = "Capture cuda graph bs [1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80]"


def at(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, timezone.utc)


def stamp(ts: float, ranks: str = " TP0") -> str:
    return time.strftime("[%Y-%m-%d %H:%M:%S", time.gmtime(ts)) + f"{ranks}] "


def startup(
    inv: str,
    start: float,
    *,
    speed: float,
    load_seconds: float,
    mrr: int,
    eager_every: int = 0,
    seed: int,
) -> StartupScript:
    s = StartupScript(unit=UNIT, invocation_id=inv, start=at(start), boot_at="2026-01-01 00:00:00")
    s.started(at(start))
    t = start + 10
    s.line(stamp(t) + "Load weight begin. avail mem=78.10 GB")
    t += load_seconds
    s.line(
        stamp(t) + f"Load weight end. elapsed={load_seconds:.2f} s, type=LlamaForCausalLM, "
        "dtype=torch.bfloat16, avail mem=63.20 GB, mem usage=14.99 GB."
    )
    s.line(
        stamp(t + 2) + "KV Cache is allocated. #tokens: 500000, K size: 10.00 GB, V size: 10.00 GB"
    )
    s.line(
        stamp(t + 2) + "max_running_requests is capped to 60 by the mamba state cache "
        "(max_mamba_cache_size=300, 5 state slots per request)."
    )
    s.line(stamp(t + 3) + "Memory pool end. avail mem=20.00 GB")
    s.line(
        stamp(t + 4)
        + "Capture cuda graph begin. This can take up to several minutes. avail mem=20.00 GB"
    )
    s.line(stamp(t + 4) + CAPTURE)
    s.line(
        stamp(t + 14)
        + "Capture cuda graph end. Time elapsed: 10.00 s. mem usage=0.50 GB. avail mem=19.50 GB."
    )
    s.line(
        stamp(t + 15) + "max_total_num_tokens=500000, chunked_prefill_size=8192, "
        f"max_prefill_tokens=16384, max_running_requests={mrr}, context_len=32768, "
        "available_gpu_mem=19.50 GB"
    )
    ready_after = t + 20 - start
    s.line(stamp(start + ready_after, ranks="") + "The server is fired up and ready to roll!")
    rng = random.Random(seed)
    lines = sim.simulate_lines(
        sim.Model(speed=speed, noise=0.04), 400, rng, 0.012, started=start, ready_after=ready_after
    )
    decodes = 0
    for i, (ts, rule, body) in enumerate(lines.lines):
        if rule == "decode_batch":
            decodes += 1
            if eager_every and decodes % eager_every == 0:
                body = body.replace("cuda graph: True", "cuda graph: False")
        s.line(
            stamp(ts) + body,
            when=at(ts),
        )
        if i == 200:
            s.line(
                stamp(ts) + "KV cache pool is full. Retract requests. #retracted_reqs: 2, "
                "#new_tokens_gained: 646, #new_token_ratio: 0.0980 -> 0.3487"
            )
            s.line(stamp(ts) + "Decode out of memory. Try to lower your batch size.")
    end = lines.lines[-1][0] + 5
    s.stopped(at(end))
    return s


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, Path]:
    tmp = tmp_path_factory.mktemp("decode")
    t0 = 1_780_000_000.0
    base = startup(BASE_ID, t0, speed=1.0, load_seconds=60, mrr=64, seed=1)
    slow = startup(
        SLOW_ID, t0 + 3 * 3600, speed=0.8, load_seconds=200, mrr=256, eager_every=4, seed=2
    )
    dead = StartupScript(unit=UNIT, invocation_id=DEAD_ID, boot_at="2026-01-01 00:00:00")
    t = t0 + 6 * 3600
    dead.started(at(t))
    dead.line(
        stamp(t + 10)
        + "Load weight end. elapsed=60.00 s, type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=3.20 GB, mem usage=74.99 GB."
    )
    dead.line(stamp(t + 11) + "Scheduler hit an exception: Traceback (most recent call last):")
    dead.line(
        "ValueError: Loaded weights leave no GPU memory for the KV cache under "
        "--mem-fraction-static=0.5.",
        when=at(t + 12),
    )
    dead.process_exited(1, at(t + 13))
    dead.failed("exit-code", at(t + 13))
    exports = []
    for name, script in (("base", base), ("slow", slow), ("dead", dead)):
        exports.append(script.write(tmp / f"{name}.export"))
    journal = build_journal(exports, tmp / "journal")
    state = tmp / "state"
    import io
    from contextlib import redirect_stdout

    out = io.StringIO()
    with redirect_stdout(out):
        code = main(
            [
                "scan",
                "--unit",
                UNIT,
                "--journal-dir",
                str(journal),
                "--state-dir",
                str(state),
                "--json",
            ]
        )
    assert code in (0, 1), out.getvalue()
    text = io.StringIO()
    with redirect_stdout(text):
        main(
            [
                "scan",
                "--unit",
                UNIT,
                "--journal-dir",
                str(journal),
                "--state-dir",
                str(tmp / "state2"),
            ]
        )
    return json.loads(out.getvalue()), text.getvalue(), state


def by_id(doc: dict[str, Any], inv: str) -> dict[str, Any]:
    return next(s for s in doc["startups"] if s["invocation_id"] == inv)


def test_slow_restart_is_regressed_at_like_load(scanned: tuple[dict[str, Any], str, Path]) -> None:
    doc, _, _ = scanned
    slow = by_id(doc, SLOW_ID)
    decode = slow["runtime"]["decode"]
    assert decode["verdict"] == "regressed"
    assert decode["ratio"] == pytest.approx(0.8, abs=0.04)
    assert decode["samples"] >= 30 and decode["baseline_samples"] >= 30
    assert decode["buckets"] and all(
        {"bucket", "samples", "baseline_samples", "median_tps", "baseline_median_tps", "ratio"}
        <= set(b)
        for b in decode["buckets"]
    )
    [drop] = [f for f in slow["findings"] if f["check"] == "decode_throughput_drop"]
    assert drop["severity"] == "warning"  # 20 %: >= 10 % warning, < 25 % critical
    assert drop["evidence"][0].startswith("decode at like load ")
    assert any(e.startswith("bucket bs") for e in drop["evidence"])
    base = by_id(doc, BASE_ID)
    assert base["runtime"]["decode"]["verdict"] == "inconclusive"
    assert base["runtime"]["decode"]["ratio"] is None


def test_startup_signals_are_facts_and_checks(scanned: tuple[dict[str, Any], str, Path]) -> None:
    doc, _, _ = scanned
    base, slow, dead = (by_id(doc, i) for i in (BASE_ID, SLOW_ID, DEAD_ID))
    assert base["facts"]["cuda_graph_max_bs"] == 80
    assert base["facts"]["mamba_running_cap"] == 60
    assert base["facts"]["mamba_running_cap_reason"] == (
        "max_mamba_cache_size=300, 5 state slots per request"
    )
    checks = {f["check"]: f for f in slow["findings"]}
    assert checks["cuda_graph_ceiling"]["current"] == 80
    assert (
        "max_running_requests 256 exceeds the largest captured CUDA-graph batch 80"
        in (checks["cuda_graph_ceiling"]["message"])
    )
    graph = checks["decode_without_cuda_graph"]
    assert graph["baseline"] == 0.0 and graph["current"] == pytest.approx(0.25, abs=0.01)
    slow_start = checks["startup_slow"]
    assert slow_start["current"] - slow_start["baseline"] == pytest.approx(140, abs=1)
    assert "weight_load: 60.0 s → 200.0 s" in slow_start["evidence"]
    assert slow["runtime"]["phases"]["weight_load"] == 200.0
    assert slow["runtime"]["phases"]["graph_capture"] == 10.0
    assert slow["runtime"]["phases"]["kv_allocation"] == 3.0
    assert base["runtime"]["retractions"] == 1 and base["runtime"]["out_of_memory_lines"] == 1
    assert dead["outcome"] == "failed"
    assert dead["failure_reason"] == "Loaded weights leave no GPU memory for the KV cache"
    assert base["findings"] == []


def test_report_prints_the_decode_line(scanned: tuple[dict[str, Any], str, Path]) -> None:
    _, text, _ = scanned
    lines = [line.strip() for line in text.splitlines() if "decode at like load" in line]
    assert any(line.endswith(": regressed") and "tok/s (−" in line for line in lines), text
