"""The record codec: a StartupRecord survives JSON, and what JSON cannot hold is made plain."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from journaltools import StartupScript, build_journal, write_export

from sglang_sentinel.cli import main
from sglang_sentinel.evidence import note
from sglang_sentinel.facts import STARTUP_FACTS
from sglang_sentinel.model import Evidence, JournalEntry, StartupRecord
from sglang_sentinel.rules import default_rules_dir, load_rules
from sglang_sentinel.rules.matcher import ExactMatcher
from sglang_sentinel.startups import StartupTracker
from sglang_sentinel.state import StateStore, builder_from_json, builder_to_json, plain
from sglang_sentinel.state.codec import (
    fact_from_doc,
    json_key,
    record_from_doc,
    record_from_json,
    record_to_doc,
    record_to_json,
)

# Values JSON gives back as they went in (nan is never equal to itself, so it is left out).
_text = st.text(max_size=12)
_number = st.integers(-(2**63), 2**63) | st.floats(allow_nan=False)
_scalar = st.none() | st.booleans() | _number | _text
_json_value = st.recursive(
    _scalar,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=20,
)
_fact = _scalar | st.tuples() | st.lists(_text, max_size=4).map(tuple)
_facts = st.dictionaries(st.sampled_from(STARTUP_FACTS) | _text, _fact, max_size=12)
_decode = st.fixed_dictionaries(
    {
        "buckets": st.dictionaries(_text, st.lists(st.floats(allow_nan=False), max_size=4)),
        "counts": st.dictionaries(_text, st.integers(0, 10**9), max_size=4),
        "phases": st.dictionaries(_text, st.floats(0, 2e9), max_size=6),
        "captured": st.lists(st.integers(1, 1024), max_size=6),
    }
)
# What a record's notes hold (evidence.py): facts recorded as null, clock skew, and old text.
_notes = (
    st.builds(note, _text)
    | st.builds(Evidence, st.just("fact_invalid"), field=_text, new=_text, detail=_text)
    | st.builds(Evidence, st.just("clock_skew"), detail=_text)
)
_records = st.builds(
    StartupRecord,
    unit=_text,
    invocation_id=st.text("0123456789abcdef", min_size=32, max_size=32),
    started_at=st.floats(0, 2e9),
    ready_at=st.none() | st.floats(0, 2e9),
    outcome=st.sampled_from(["ready", "failed", "starting"]),
    facts=_facts,
    launch_flags=st.lists(_text, max_size=4).map(tuple),
    server_args=st.dictionaries(_text, _json_value, max_size=6),
    failure_reason=st.none() | _text,
    ended_at=st.none() | st.floats(0, 2e9),
    rule_hits=st.dictionaries(_text, st.integers(0, 10**6), max_size=4),
    decode=_decode,
    notes=st.lists(_notes, max_size=3).map(tuple),
)


@settings(max_examples=300, deadline=None)
@given(_records)
def test_a_record_survives_json(record: StartupRecord) -> None:
    assert record_from_json(record_to_json(record)) == record
    doc = json.loads(json.dumps(record_to_doc(record)))
    assert record_from_doc(doc) == record


@settings(max_examples=100, deadline=None)
@given(_records)
def test_the_stored_text_is_canonical(record: StartupRecord) -> None:
    """The same record is always the same text: keys sorted, whatever order facts came in."""
    reordered = StartupRecord(
        **{
            **{name: getattr(record, name) for name in StartupRecord.__slots__},
            "facts": dict(reversed(list(record.facts.items()))),
        }
    )
    assert record_to_json(reordered) == record_to_json(record)


def test_plain_makes_tuples_lists_and_keys_strings_as_json_writes_them() -> None:
    value = {"a": (1, (2, 3)), 1: "x", None: [("y",)], False: {1.5: ()}}
    assert plain(value) == {"a": [1, [2, 3]], "1": "x", "null": [["y"]], "false": {"1.5": []}}
    assert json.dumps(plain(value)) == json.dumps(value)
    assert [json_key(k) for k in ("k", 7, None, False, 2.5)] == ["k", "7", "null", "false", "2.5"]


def test_plain_finite_spells_out_what_json_cannot_carry() -> None:
    value = {"f": (float("nan"), float("inf"), -float("inf"), 1.5, True)}
    assert plain(value, finite=True) == {"f": ["nan", "inf", "-inf", 1.5, True]}
    assert plain(float("inf")) == float("inf")  # the store keeps the float (JSON `Infinity`)


@pytest.mark.parametrize(
    ("doc", "fact"),
    [
        (["a.json", "b.json"], ("a.json", "b.json")),
        ([1, None], ("1", "None")),
        (3, 3),
        (2.5, 2.5),
        (False, False),
        (None, None),
        ("x", "x"),
        ({"hand": "edited"}, "{'hand': 'edited'}"),
    ],
)
def test_fact_from_doc(doc: Any, fact: Any) -> None:
    assert fact_from_doc(doc) == fact


def test_a_nested_dict_with_mixed_keys_is_stored(tmp_path: Path) -> None:
    """Bug fixed: a server_args dict holding `{1: 'a', 'b': 2}` made `sort_keys` raise
    TypeError, so the startup was never stored."""
    record = StartupRecord(
        unit="sglang-codec.service",
        invocation_id="c" * 32,
        started_at=1.0,
        ready_at=None,
        outcome="starting",
        facts={},
        server_args={"lora": {1: "a", "b": 2}, "plain": 3},
    )
    store = StateStore(tmp_path / "state")
    try:
        with store.transaction():
            store.save_startup(record, None)
        stored = store.startup(record.invocation_id)
    finally:
        store.close()
    assert stored is not None
    assert stored.server_args == {"lora": {"1": "a", "b": 2}, "plain": 3}


def test_scan_stores_a_startup_whose_server_args_have_mixed_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bug fixed: the tracker's resumable state hit the same TypeError, and the startup was
    missing from the scan."""
    script = StartupScript(
        unit="sglang-codec.service",
        cmdline="/usr/bin/python3 -m sglang.launch_server --model-path /models/m",
        start="2026-10-30 10:00:00",
    )
    script.started("2026-10-30 10:00:00")
    script.line(
        "[2026-10-30 10:00:01] server_args={'model_path': '/models/m', 'tp_size': 1, "
        "'lora_paths': {1: 'a', 'b': 2}}"
    )
    script.line("[2026-10-30 10:00:55] The server is fired up and ready to roll!")
    export = write_export(script.entries(), tmp_path / "j.export")
    journal = build_journal(export, tmp_path / "journal")
    state = tmp_path / "s"
    argv = ["scan", "--journal-dir", str(journal), "--state-dir", str(state), "--json"]
    code = main([*argv, "--unit", "sglang-codec.service"])
    out, err = capsys.readouterr()
    assert code == 0, err
    (startup,) = json.loads(out)["startups"]
    assert startup["outcome"] == "ready"
    assert startup["server_args"]["lora_paths"] == {"1": "a", "b": 2}


def test_the_tracker_s_state_of_a_startup_under_way_is_the_codec_s() -> None:
    """The builders table's shape is written and read by state/codec.py alone: the tracker's
    saved form reads back through `builder_from_json` and `builder_to_json` writes it again
    to the byte."""
    inv = "c" * 32
    tracker = StartupTracker(ExactMatcher(load_rules([default_rules_dir()])))
    lines = (
        "[2026-03-09 10:00:01 TP0] Load weight begin. avail mem=78.50 GB",
        "[2026-03-09 10:00:30 TP0] max_total_num_tokens=120000, chunked_prefill_size=8192, "
        "max_prefill_tokens=16384, max_running_requests=48, context_len=32768, "
        "available_gpu_mem=9.50 GB",
    )
    entries = [
        JournalEntry("sglang-qwen.service", text, 1_773_050_400_000_000 + n, inv)
        for n, text in enumerate(lines)
    ]
    tracker.feed(entries, lambda: 1_773_050_400_000_000)
    _, saved = tracker.saved_form(inv)
    doc = builder_from_json(saved)
    assert (doc.unit, doc.invocation_id) == ("sglang-qwen.service", inv)
    assert doc.facts["max_running_requests"] == 48
    assert doc.ready_at is None and doc.failure_reason is None
    fields = {name: getattr(doc, name) for name in doc.__slots__}
    assert builder_to_json(**fields) == saved
