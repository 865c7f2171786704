"""The report renderer on its own: the text a person reads, the compact evidence line, the JSON
contract (evidence and notes as their sentences), and the diff."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from records import base, record

from sglang_sentinel.evidence import note
from sglang_sentinel.facts import STARTUP_FACTS
from sglang_sentinel.model import Comparison, Evidence, Finding
from sglang_sentinel.outputs import render_diff, render_report, scan_json, startup_json
from sglang_sentinel.outputs.report import compact_evidence, merged_evidence, render_comparison

FLAGS = Evidence("flags_added", new=("--enable-a", "--enable-b"))
GONE = Evidence("flags_removed", old=("--disable-c",))
MEMORY = Evidence("memory_at_load", old=93.72, new=87.07)
LOGGED = Evidence("logged_by_sglang", field="piecewise_cuda_graph_disabled_reason", new="tbo")
SCHEMA = Evidence("schema_changed", old=3, new=13)


def self_set(field: str) -> Evidence:
    return Evidence("server_arg_changed", field=field, old=None, new=1, origin="set_by_sglang")


ASKED = Evidence(
    "server_arg_changed",
    field="tp_size",
    old=2,
    new=4,
    origin="command_line",
    flag="--tp-size",
)


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The text report shows local time; pin it to UTC for exact lines."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_compact_line_puts_flags_first_then_the_rest_then_what_sglang_set() -> None:
    items = [MEMORY, self_set("x"), ASKED, LOGGED, FLAGS, SCHEMA, GONE, note("z=-4, p=0.01")]
    assert compact_evidence(items) == (
        "+--enable-a +--enable-b −--disable-c; free GPU memory at load 93.72 → 87.07 GB; "
        "z=-4, p=0.01; set by SGLang, not on the command line: x; "
        "schema changed (SGLang version?) (details: sentinel diff)"
    )


def test_compact_line_names_six_settings_sglang_set_and_counts_the_rest() -> None:
    items = [self_set(f"f{i}") for i in range(9)]
    assert compact_evidence(items) == (
        "set by SGLang, not on the command line: f0, f1, f2, f3, f4, f5 and 3 more "
        "(details: sentinel diff)"
    )


def test_merged_evidence_keeps_the_first_of_items_that_say_the_same() -> None:
    a = Finding("a", "warning", 1, 0, "a", evidence=(LOGGED, MEMORY))
    b = Finding(
        "b",
        "warning",
        1,
        0,
        "b",
        evidence=(MEMORY, note("free GPU memory at load 93.72 → 87.07 GB"), FLAGS),
    )
    assert merged_evidence([a, b]) == [LOGGED, MEMORY, FLAGS]


def _comparison() -> Comparison:
    current = record(
        invocation="c37e91d0" + "0" * 24,
        max_running_requests=26,
        kv_cache_tokens=277552,
        cuda_graph=True,
        piecewise_cuda_graph=False,
        load_avail_mem_gb=87.07,
        max_total_num_tokens=277552,
    )
    baseline = base(max_running_requests=48)
    findings = (
        Finding(
            "piecewise_cuda_graph_disabled",
            "warning",
            True,
            False,
            "piecewise CUDA graph on → off",
            evidence=(LOGGED, FLAGS, MEMORY),
        ),
        Finding(
            "max_running_requests_drop",
            "critical",
            48,
            26,
            "max_running_requests 48 → 26 (−46 %)",
            evidence=(FLAGS, MEMORY, self_set("prefill_cp_mode")),
        ),
    )
    return Comparison(current, baseline, "pinned", findings)


def test_text_report_orders_by_severity_and_shows_one_changed_line() -> None:
    """The critical finding first; the evidence of both once, on one line, the logged reason out."""
    assert render_comparison(_comparison()).splitlines() == [
        "sglang-qwen.service  startup c37e91d0  2023-11-14 22:13:20  ready"
        "   vs pinned baseline aaaaaaaa",
        "  CRITICAL  max_running_requests 48 → 26 (−46 %)",
        "  WARNING   piecewise CUDA graph on → off",
        "  changed   +--enable-a +--enable-b; free GPU memory at load 93.72 → 87.07 GB; "
        "set by SGLang, not on the command line: prefill_cp_mode (details: sentinel diff)",
        "  facts     max_running_requests=26 max_total_num_tokens=277552 kv_tokens=277552 "
        "cuda_graph=True piecewise_cuda_graph=False free_at_load_gb=87.07",
    ]


def test_text_report_of_a_clean_first_startup_and_of_none() -> None:
    first = record(
        max_running_requests=48,
        max_total_num_tokens=1,
        kv_cache_tokens=1,
        cuda_graph=True,
        piecewise_cuda_graph=True,
        load_avail_mem_gb=80.0,
    )
    first = replace(first, facts={**first.facts, "startup_seconds": 100.0})
    assert render_report([Comparison(first, None, None, ())]) == (
        "sglang-qwen.service  startup bbbbbbbb  2023-11-14 22:13:20  ready in 1m40s\n"
        "  ok        first ready startup: nothing to compare (pin it with "
        "`sentinel baseline --pin`)\n"
        "  facts     max_running_requests=48 max_total_num_tokens=1 kv_tokens=1 cuda_graph=True "
        "piecewise_cuda_graph=True free_at_load_gb=80.0"
    )
    assert render_report([]) == "no startups found for the selected units"


def test_json_contract_carries_evidence_and_notes_as_their_sentences() -> None:
    c = _comparison()
    invalid = Evidence("fact_invalid", field="tp_size", new="nan", detail="is not a finite number")
    skew = Evidence("clock_skew", detail="ordered by the journal")
    c = replace(c, record=replace(c.record, notes=(invalid, skew)))
    doc = json.loads(json.dumps(scan_json([c]), allow_nan=False))
    [startup] = doc["startups"]
    assert list(startup) == [
        "unit",
        "invocation_id",
        "started_at",
        "ready_at",
        "outcome",
        "failure_reason",
        "facts",
        "launch_flags",
        "server_args",
        "notes",
        "baseline",
        "runtime",
        "findings",
    ]
    assert list(startup["facts"]) == list(STARTUP_FACTS)
    assert startup["notes"] == [
        "fact_invalid: tp_size=nan is not a finite number; recorded as null",
        "clock_skew: ordered by the journal",
    ]
    assert startup["baseline"] == {"invocation_id": "a" * 32, "kind": "pinned"}
    assert startup["findings"][0] == {
        "check": "piecewise_cuda_graph_disabled",
        "severity": "warning",
        "baseline": True,
        "current": False,
        "message": "piecewise CUDA graph on → off",
        "evidence": [
            "SGLang logged: disabled because tbo",
            "flags added: --enable-a, --enable-b",
            "free GPU memory at load 93.72 → 87.07 GB",
        ],
    }
    assert startup["findings"][1]["evidence"][2] == (
        "server_args prefill_cp_mode: unset → 1; not on the command line: set by SGLang"
    )


def test_json_contract_spells_floats_json_cannot_carry() -> None:
    c = _comparison()
    c = replace(c, findings=(Finding("x", "info", math.inf, ("1", "2"), "m"),))
    [finding] = startup_json(c)["findings"]
    assert (finding["baseline"], finding["current"], finding["evidence"]) == ("inf", ["1", "2"], [])


def test_diff_lists_changed_facts_then_the_evidence_sentences() -> None:
    a = base(max_running_requests=48, cuda_graph=True)
    b = record(max_running_requests=26, cuda_graph=True)
    assert render_diff(a, b, [FLAGS, ASKED]).splitlines() == [
        "sglang-qwen.service: aaaaaaaa (2023-11-14 22:13:20) → bbbbbbbb (2023-11-14 22:13:20)",
        f"  {'max_running_requests':<38} 48 → 26",
        "  flags added: --enable-a, --enable-b",
        "  server_args tp_size: 2 → 4; --tp-size on the command line",
    ]
