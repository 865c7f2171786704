"""Numbers: every fact finite and in range or null with a `fact_invalid` note; strict JSON;
a /metrics page that one value cannot break; no exit 3 on an infinite server_args value."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from journaltools import StartupScript, build_journal
from prometheus_client import CollectorRegistry, generate_latest

from sglang_sentinel.cli import main
from sglang_sentinel.compare import Snapshot, UnitStatus, load_policy
from sglang_sentinel.daemon.metrics import SentinelCollector
from sglang_sentinel.evidence import render_evidence
from sglang_sentinel.fact_ranges import problem, sane_facts
from sglang_sentinel.facts import KNOWN_FACTS, RANGES, STARTUP_FACTS
from sglang_sentinel.model import Comparison, StartupRecord

HUGE = "9" * 400
UNIT = "sglang-qwen.service"


def _strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def _startup(day: str, summary: str, server_args: str) -> StartupScript:
    s = StartupScript(start=f"{day} 10:00:00", boot_at="2026-01-01 00:00:00")
    s.started(f"{day} 10:00:00")
    s.line(f"[{day} 10:00:10] server_args=ServerArgs({server_args})")
    s.line(f"[{day} 10:00:50 TP0] {summary}")
    s.line(f"[{day} 10:00:55] The server is fired up and ready to roll!")
    return s


def _summary(mrr: str, tokens: str = "1000") -> str:
    return (
        f"max_total_num_tokens={tokens}, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        f"max_running_requests={mrr}, context_len=4096, available_gpu_mem=10.00 GB"
    )


def _scan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], *scripts: StartupScript
) -> tuple[int, str, str]:
    exports = [s.write(tmp_path / f"{i}.export") for i, s in enumerate(scripts)]
    journal = build_journal(exports, tmp_path / "j")
    argv = ["scan", "--journal-dir", str(journal), "--state-dir", str(tmp_path / "state")]
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    return code, out, err


def test_every_ranged_fact_is_a_known_fact() -> None:
    assert set(RANGES) <= KNOWN_FACTS


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("tp_size", math.nan, "tp_size=nan is not a finite number"),
        ("dp_size", math.inf, "dp_size=inf is not a finite number"),
        ("max_running_requests", int(HUGE), "max_running_requests=a 400-digit integer is outside"),
        ("kv_cache_tokens", -5, "kv_cache_tokens=-5 is outside [0, 1e+12]"),
        ("startup_seconds", -600.0, "startup_seconds=-600.0 is outside"),
    ],
)
def test_insane_values_are_named(name: str, value: float, why: str) -> None:
    text = problem(name, value)
    assert text is not None and text.startswith(why)
    facts, notes = sane_facts({name: value, "context_len": 4096, "model_path": "/m"})
    assert facts == {name: None, "context_len": 4096, "model_path": "/m"}
    assert len(notes) == 1 and notes[0].kind == "fact_invalid" and notes[0].field == name
    assert render_evidence(notes[0]).startswith("fact_invalid: " + why)


def test_sane_values_pass() -> None:
    for value in (0, 1, 48, 507050, 93.72, True):
        assert problem("max_running_requests", value) is None
    assert problem("chunked_prefill_size", -1) is None
    assert problem("model_path", "/models/x" * 100) is None


def test_scan_nulls_impossible_facts_with_a_finding_and_strict_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """400 digits, nan and inf: null facts, a fact_invalid finding, no NaN in the output."""
    good = _startup("2026-01-02", _summary("48"), "model_path='/m', tp_size=4, dp_size=1")
    bad = _startup(
        "2026-01-03",
        _summary(HUGE, tokens=HUGE),
        "model_path='/m', tp_size=nan, dp_size=inf, watchdog_timeout=-inf",
    )
    code, out, err = _scan(tmp_path, capsys, good, bad)
    assert code == 0, err
    doc = _strict(out)  # raises on a bare NaN / Infinity
    second = doc["startups"][1]
    facts = second["facts"]
    assert facts["max_running_requests"] is None and facts["max_total_num_tokens"] is None
    assert facts["tp_size"] is None and facts["dp_size"] is None
    assert second["server_args"]["tp_size"] == "nan"
    assert second["server_args"]["watchdog_timeout"] == "-inf"
    assert len(second["notes"]) == 4
    invalid = [f for f in second["findings"] if f["check"] == "fact_invalid"]
    assert len(invalid) == 1
    assert invalid[0]["severity"] == "warning"
    assert sorted(invalid[0]["current"]) == sorted(
        ["max_running_requests", "max_total_num_tokens", "tp_size", "dp_size"]
    )
    assert "400-digit integer" in invalid[0]["message"]
    assert HUGE not in out
    # The gate sees it too.
    assert main(["check", "--unit", UNIT, "--state-dir", str(tmp_path / "state")]) == 1


def test_scan_does_not_crash_when_a_server_args_float_becomes_infinite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _startup("2026-01-02", _summary("48"), "model_path='/m', watchdog_timeout=300.0")
    b = _startup("2026-01-03", _summary("48"), "model_path='/m', watchdog_timeout=inf")
    c = _startup("2026-01-04", _summary("48"), "model_path='/m', watchdog_timeout=nan")
    code, out, err = _scan(tmp_path, capsys, a, b, c)
    assert code == 0, err
    doc = _strict(out)
    assert [s["server_args"]["watchdog_timeout"] for s in doc["startups"]] == [300.0, "inf", "nan"]
    assert main(["diff", "--unit", UNIT, "--state-dir", str(tmp_path / "state")]) == 0
    text = capsys.readouterr().out
    assert "inf" in text and "nan" in text


def _record(facts: dict[str, Any]) -> StartupRecord:
    full: dict[str, Any] = dict.fromkeys(STARTUP_FACTS)
    full.update(facts)
    return StartupRecord(
        unit=UNIT,
        invocation_id="ab" * 16,
        started_at=1.7e9,
        ready_at=1.7e9 + 60,
        outcome="ready",
        facts=full,
    )


def test_metrics_page_survives_values_stored_before_sanitizing() -> None:
    """A record from an older state file with a 400-digit int, nan and inf still scrapes."""
    record = _record(
        {
            "max_running_requests": int(HUGE),
            "tp_size": int(HUGE),
            "kv_cache_tokens": math.nan,
            "available_gpu_mem_gb": math.inf,
            "context_len": 4096,
        },
    )
    runtime = {"gen_throughput": math.inf, "running_requests": 3}
    comparison = Comparison(record, None, None, ())
    registry = CollectorRegistry(auto_describe=False)
    registry.register(
        SentinelCollector(
            lambda: Snapshot(
                units=(UnitStatus(UNIT, comparison, None, (), False, {"ready": 1}, runtime),),
                policy=load_policy(),
            )
        )
    )
    page = generate_latest(registry).decode()
    assert f'sglang_sentinel_context_length_tokens{{unit="{UNIT}"}} 4096.0' in page
    assert f'sglang_sentinel_running_requests{{unit="{UNIT}"}} 3.0' in page
    assert "sglang_sentinel_max_running_requests{" not in page
    assert "sglang_sentinel_kv_cache_tokens{" not in page
    assert "sglang_sentinel_available_gpu_memory_bytes{" not in page
    assert "sglang_sentinel_generation_throughput_tokens_per_second{" not in page
    assert "NaN" not in page and "+Inf" not in page
    assert HUGE[:50] not in page
