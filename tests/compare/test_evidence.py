"""Evidence as data: one sentence per kind, the stored form, and where it comes from."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import pytest
from records import POLICY, base, checks, record

from sglang_sentinel.compare import common_evidence
from sglang_sentinel.evidence import (
    KINDS,
    evidence_from_json,
    evidence_to_json,
    note,
    render_evidence,
)
from sglang_sentinel.fact_ranges import sane_facts
from sglang_sentinel.model import Evidence
from sglang_sentinel.outputs.report import compact_evidence
from sglang_sentinel.serverargs import SWITCHES, setting_flags, switch_flags
from sglang_sentinel.serverargs.diff import RENAMES

# One item of every kind and the exact sentence the JSON contract and the report carry.
SENTENCES = [
    (
        Evidence("flags_added", new=("--enable-foo", "--tp-size 4")),
        "flags added: --enable-foo, --tp-size 4",
    ),
    (Evidence("flags_removed", old=("--disable-bar",)), "flags removed: --disable-bar"),
    (
        Evidence("flags_changed", old=("--tp-size 2", "--dp 1"), new=("--tp-size 4", "--dp 2")),
        "flags changed: --tp-size 2 → --tp-size 4; --dp 1 → --dp 2",
    ),
    (
        Evidence(
            "server_arg_changed",
            field="chunked_prefill_size",
            old=8192,
            new=4096,
            origin="command_line",
            flag="--chunked-prefill-size",
        ),
        "server_args chunked_prefill_size: 8192 → 4096; --chunked-prefill-size on the command line",
    ),
    (
        Evidence(
            "server_arg_changed",
            field="linear_attn_backend",
            old=None,
            new="triton",
            origin="set_by_sglang",
            detail="field added",
        ),
        "server_args linear_attn_backend: unset → triton (field added); "
        "not on the command line: set by SGLang",
    ),
    (
        Evidence(
            "server_arg_changed",
            field="mem_fraction_static",
            old=0.88,
            new=0.9,
            origin="command_line_not_seen",
        ),
        "server_args mem_fraction_static: 0.88 → 0.9; command line not seen",
    ),
    (
        Evidence("schema_changed", old=3, new=13),
        "server_args schema changed (SGLang version?): 13 field(s) added with default values, "
        "3 removed",
    ),
    (
        Evidence("memory_at_load", old=93.72, new=87.07),
        "free GPU memory at load 93.72 → 87.07 GB",
    ),
    (
        Evidence("logged_by_sglang", field="piecewise_cuda_graph_disabled_reason", new="tbo"),
        "SGLang logged: disabled because tbo",
    ),
    (
        Evidence("fact_invalid", field="tp_size", new="nan", detail="is not a finite number"),
        "fact_invalid: tp_size=nan is not a finite number; recorded as null",
    ),
    (
        Evidence("clock_skew", detail="the wall clock moved +3600 s"),
        "clock_skew: the wall clock moved +3600 s",
    ),
    (
        Evidence("phase_duration", field="weight_load", old=60.0, new=200.0),
        "weight_load: 60.0 s → 200.0 s",
    ),
    (Evidence("phase_duration", field="graph_capture", new=12.5), "graph_capture: ? s → 12.5 s"),
    (note("z=-4.1, p=0.0001"), "z=-4.1, p=0.0001"),
]


@pytest.mark.parametrize(("item", "text"), SENTENCES, ids=[s[0].kind for s in SENTENCES])
def test_each_kind_has_one_sentence(item: Evidence, text: str) -> None:
    assert render_evidence(item) == text


def test_every_kind_is_covered_by_a_sentence() -> None:
    assert {item.kind for item, _ in SENTENCES} == KINDS


@pytest.mark.parametrize("item", [s[0] for s in SENTENCES], ids=[s[0].kind for s in SENTENCES])
def test_the_stored_form_round_trips(item: Evidence) -> None:
    stored = json.loads(json.dumps(evidence_to_json(item)))
    assert evidence_from_json(stored) == item
    assert stored["kind"] == item.kind
    assert None not in stored.values()


def test_text_an_older_release_stored_reads_back_as_a_note_that_says_the_same() -> None:
    old = "server_args tp_size: 2 → 4; --tp-size on the command line"
    item = evidence_from_json(old)
    assert item == Evidence("note", detail=old)
    assert render_evidence(item) == old
    # A mapping of an unknown kind (a newer release's) is shown, not dropped or crashed on.
    assert evidence_from_json({"kind": "from_the_future", "x": 1}).kind == "note"


def test_insane_facts_become_fact_invalid_evidence_naming_the_fact() -> None:
    _, notes = sane_facts({"dp_size": math.inf, "kv_cache_tokens": -5})
    assert notes == [
        Evidence("fact_invalid", field="dp_size", new="inf", detail="is not a finite number"),
        Evidence("fact_invalid", field="kv_cache_tokens", new="-5", detail="is outside [0, 1e+12]"),
    ]


def test_fact_invalid_finding_takes_the_fact_names_from_the_records_not_the_sentences() -> None:
    _, notes = sane_facts({"tp_size": math.nan, "max_running_requests": 10**400})
    current = replace(record(), notes=(*notes, Evidence("clock_skew", detail="x")))
    finding = checks(current, None)["fact_invalid"]
    assert finding.current == ("tp_size", "max_running_requests")
    assert finding.message == (
        "facts reported with impossible values, recorded as null: "
        "tp_size=nan is not a finite number; recorded as null; "
        "max_running_requests=a 401-digit integer is outside [0, 1e+12]; recorded as null"
    )
    assert finding.evidence == tuple(notes)


def test_flags_evidence_carries_the_flags_and_the_compact_line_uses_them_as_they_are() -> None:
    """A flag whose value holds ", " is one flag: the old sentence split would have broken it."""
    old = base(flags=("--model-path /m", "--tp-size 2", "--json-model-override-args {}"))
    new = record(
        flags=(
            "--model-path /m",
            "--tp-size 4",
            '--json-model-override-args {"a": 1, "b": 2}',
            "--enable-x",
        ),
    )
    evidence = common_evidence(new, old)
    assert evidence[0] == Evidence("flags_added", new=("--enable-x",))
    assert evidence[1] == Evidence(
        "flags_changed",
        old=("--tp-size 2", "--json-model-override-args {}"),
        new=("--tp-size 4", '--json-model-override-args {"a": 1, "b": 2}'),
    )
    removed = common_evidence(old, new)
    assert removed[0] == Evidence("flags_removed", old=("--enable-x",))
    assert compact_evidence(removed).startswith("−--enable-x; flags changed: ")


# -- one table of CUDA-graph switches ---------------------------------------------------------

_0523 = {
    "model_path": "/m",
    "cuda_graph_backend_prefill": None,
    "cuda_graph_backend_decode": None,
}


def _graph_config(decode: str, prefill: str) -> dict[str, Any]:
    return {"decode": {"backend": decode}, "prefill": {"backend": prefill}}


@pytest.mark.parametrize(
    ("fact", "flag", "changed", "config"),
    [
        (
            "piecewise_cuda_graph",
            "--cuda-graph-backend-prefill disabled",
            "cuda_graph_config.prefill.backend",
            _graph_config("full", "disabled"),
        ),
        (
            "cuda_graph",
            "--disable-cuda-graph",
            "cuda_graph_config.decode.backend",
            _graph_config("disabled", "breakable"),
        ),
    ],
)
def test_a_0523_switch_given_by_its_own_flag_is_not_said_to_be_set_by_sglang(
    fact: str, flag: str, changed: str, config: dict[str, Any]
) -> None:
    """0.5.23 resolves `--cuda-graph-backend-prefill` (or the deprecated `--disable-cuda-graph`)
    into `cuda_graph_config`; the finding and its server_args evidence both name the flag.

    Before the one table, the finding said the flag was on the command line while the evidence
    for the resolved field said "not on the command line: set by SGLang"."""
    old = base(
        server_args={**_0523, "cuda_graph_config": _graph_config("full", "breakable")},
        flags=("--model-path /m",),
        **{fact: True},
    )
    new = replace(
        record(server_args={**_0523, "cuda_graph_config": config}, flags=("--model-path /m", flag)),
        facts={fact: False},
    )
    finding = checks(new, old, POLICY)[f"{fact}_disabled"]
    given = flag.split(" ", 1)[0]
    assert finding.message.endswith(f": {given} is on the command line")
    [item] = [e for e in finding.evidence if e.kind == "server_arg_changed" and e.field == changed]
    assert (item.origin, item.flag) == ("command_line", given)
    assert render_evidence(item).endswith(f"; {given} on the command line")
    assert "set by SGLang" not in compact_evidence(finding.evidence)


def test_a_0523_switch_sglang_turned_off_itself_is_set_by_sglang_in_message_and_evidence() -> None:
    old = base(
        server_args={**_0523, "cuda_graph_config": _graph_config("full", "breakable")},
        flags=("--model-path /m",),
        piecewise_cuda_graph=True,
    )
    new = record(
        server_args={**_0523, "cuda_graph_config": _graph_config("full", "disabled")},
        flags=("--model-path /m",),
        piecewise_cuda_graph=False,
    )
    finding = checks(new, old, POLICY)["piecewise_cuda_graph_disabled"]
    assert finding.message == (
        "piecewise CUDA graph on → off; cuda_graph_config.prefill.backend='disabled' "
        "not on the command line: set by SGLang"
    )
    assert compact_evidence(finding.evidence) == (
        "set by SGLang, not on the command line: cuda_graph_config.prefill.backend "
        "(details: sentinel diff)"
    )


def test_every_switch_spelling_in_the_table_names_flags_the_evidence_accepts() -> None:
    """switch_flags (the finding) and setting_flags (the evidence) read the same RENAMES rows."""
    for name, rename in RENAMES.items():
        if rename.canonical in SWITCHES and rename.meaning != "enable":
            assert set(switch_flags(rename.canonical)) <= set(setting_flags(name)), name
    assert setting_flags("chunked_prefill_size") == ("--chunked-prefill-size",)
    # An --enable- spelling only turns a feature on: it does not explain another spelling.
    assert "--enable-piecewise-cuda-graph" not in setting_flags("disable_piecewise_cuda_graph")
