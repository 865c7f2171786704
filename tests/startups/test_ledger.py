"""The downgrade ledger: masks, the per-startup ledger in the tracker, and the diff's finding."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from journaltools import build_journal, seed_fixture_dir

from sglang_sentinel.cli import main
from sglang_sentinel.compare import UnitStatus, alerting, compare, load_policy
from sglang_sentinel.errors import ConfigError
from sglang_sentinel.logtemplates import log_diff, template_of
from sglang_sentinel.model import UNIT_STARTED, JournalEntry, StartupRecord
from sglang_sentinel.outputs import render_log_diff, render_page
from sglang_sentinel.rules import MemoMatcher, default_rules_dir, load_rules
from sglang_sentinel.startups import (
    OTHER_CHARS,
    OTHER_KEPT,
    OTHER_LINES,
    TEMPLATES_KEPT,
    LogLedger,
    StartupTracker,
    Vocabulary,
)
from sglang_sentinel.state import StateStore
from sglang_sentinel.state.codec import record_from_json, record_to_json

UNIT = "sglang-qwen.service"
RULES = load_rules([default_rules_dir()])
POLICY = load_policy()
READY = "[2026-03-09 21:34:27] The server is fired up and ready to roll!"
SUMMARY = (
    "[2026-03-09 21:34:20 TP0] max_total_num_tokens=507050, chunked_prefill_size=8192, "
    "max_prefill_tokens=16384, max_running_requests={mrr}, context_len=262144, "
    "available_gpu_mem=20.64 GB"
)


def run(lines: Sequence[str], inv: str, t0: int = 1_000_000_000_000) -> StartupRecord:
    """One startup through a fresh tracker: its first line an entry, the rest raw (hot path)."""
    tracker = StartupTracker(MemoMatcher(RULES))
    started = JournalEntry(
        UNIT, "Started sglang", t0, invocation_id=inv, from_pid1=True, message_id=UNIT_STARTED
    )
    first = JournalEntry(UNIT, lines[0], t0 + 1, invocation_id=inv)
    tracker.feed([started, first, *(line.encode() for line in lines[1:])], lambda: t0 + 2)
    return {r.invocation_id: r for r, _ in tracker.take_dirty()}[inv]


def startup(*extra: str, mrr: int = 48, after_ready: Sequence[str] = ()) -> list[str]:
    return [
        "[2026-03-09 21:31:09] Attention backend not specified. Use flashinfer backend by default.",
        *extra,
        SUMMARY.format(mrr=mrr),
        READY,
        *after_ready,
    ]


UPGRADE = (
    "SGLang version changed (server_args fields: 27 added, 7 removed): a message the new "
    "release rewords shows as one new and one gone template"
)
NOTHING_NEW: dict[str, Any] = {"new": [], "gone": [], "version_changed": None, "dropped": 0}


def new_templates(record: StartupRecord, baseline: StartupRecord) -> list[str]:
    c = compare(record, baseline, "pinned", POLICY)
    assert c.log_diff is not None
    return [line["template"] for line in c.log_diff["new"]]


def test_lists_of_another_length_and_other_figures_are_the_same_template() -> None:
    a = template_of(
        "Disable prefill CUDA graph capture because no configured capture size fits "
        "backend=full with max_capture_tokens=8192 (sizes [1, 2, 4, 8]) at /opt/a/b.json 0x7f3a"
    )
    b = template_of(
        "Disable prefill CUDA graph capture because no configured capture size fits "
        "backend=full with max_capture_tokens=512 (sizes [1, 2]) at /srv/x.json 0x11"
    )
    assert (
        a
        == b
        == (
            "Disable prefill CUDA graph capture because no configured capture size fits "
            "backend=full with max_capture_tokens=<N> (sizes <LIST>) at <PATH> <HEX>"
        )
    )


def test_masks_each_kind_of_value() -> None:
    assert (
        template_of(
            "Init 'abc' \"x y\" tcp://10.0.0.1:29500 10.1.2.3:80 "
            "3f2a9c1b-7e4d-4a11-8b6c-5d4e3f2a1b0c deadbeef1234cafe 22.81 GB 50% -3 1e-05 "
            "{'a': 1, 'b': [2, 3]} (1, 2) \x1b[33mwarn\x1b[0m"
        )
        == "Init <S> <S> <URL> <IP> <UUID> <HEX> <N> <N> <N> <N> <LIST> <LIST> warn"
    )


def test_versions_and_dotted_numbers_are_one_value() -> None:
    assert (
        template_of("Fallback to triton version 3.4.0 for MoE kernel config.")
        == template_of("Fallback to triton version 3.5.1 for MoE kernel config.")
        == "Fallback to triton version <N> for MoE kernel config."
    )


def test_a_genuinely_new_reason_is_a_new_template() -> None:
    native = template_of("Cuda graph is disabled because of using torch native attention backend")
    flex = template_of("Cuda graph is disabled because of using torch Flex Attention backend")
    assert native != flex
    # Words with digits are names, not figures: another model is another template.
    assert template_of("Qwen3ForCausalLM has no SGLang implementation") != template_of(
        "Llama4ForCausalLM has no SGLang implementation"
    )


def scan_json(capsys: pytest.CaptureFixture[str], journal: Path, state: Path) -> list[Any]:
    code = main(["scan", "--journal-dir", str(journal), "--state-dir", str(state), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    startups: list[Any] = json.loads(out)["startups"]
    return [s for s in startups if s["unit"] == UNIT]


def test_the_seed_startup_gets_a_ledger_finding_for_its_new_pcg_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The seed's story, end to end: the one downgrade line its baseline never printed is
    reported; the other lines that changed with the release are information."""
    journal = build_journal(seed_fixture_dir() / "journal.export", tmp_path / "j", "seed")
    first, second = scan_json(capsys, journal, tmp_path / "s")
    assert first["log_diff"] is None  # nothing to compare with
    pcg = "Disable piecewise CUDA graph because --disable-piecewise-cuda-graph is set"
    diff = second["log_diff"]
    assert [line for line in diff["new"] if line["kind"] == "downgrade"] == [
        {"template": pcg, "example": pcg, "ranks": 4, "kind": "downgrade"}
    ]
    # 0.5.9 then 0.5.10rc0: said once; the 5 new and 4 gone templates are those the
    # research's mask found on this pair (downgrades-research.md §2.1), all real differences.
    assert diff["version_changed"] == UPGRADE
    assert [(line["kind"], line["ranks"], line["template"]) for line in diff["new"]] == [
        (
            "other",
            1,
            "The command line argument <S> is deprecated and will be removed in future versions.",
        ),
        (
            "other",
            4,
            "Load weight end. elapsed=<N>, type=Qwen3_5MoeForConditionalGeneration, avail "
            "mem=<N>, mem usage=<N>.",
        ),
        ("other", 1, "Linear attention kernel backend: decode=triton, prefill=triton"),
        (
            "other",
            1,
            "GDN kernel dispatcher: decode=TritonGDNKernel, extend=TritonGDNKernel, "
            "verify=TritonGDNKernel packed_decode=True",
        ),
        ("downgrade", 4, pcg),
    ]
    assert [(line["kind"], line["ranks"], line["template"]) for line in diff["gone"]] == [
        (
            "other",
            4,
            "Load weight end. elapsed=<N>, type=Qwen3_5MoeForConditionalGeneration, "
            "dtype=torch.bfloat16, avail mem=<N>, mem usage=<N>.",
        ),
        ("other", 4, "Capture piecewise CUDA graph begin. avail mem=<N>"),
        ("other", 1, "Capture cuda graph num tokens <LIST>"),
        (
            "other",
            4,
            "Capture piecewise CUDA graph end. Time elapsed: <N>. mem usage=<N>. avail mem=<N>.",
        ),
    ]
    ledger = [f for f in second["findings"] if f["check"] == "new_downgrade_message"]
    # piecewise_cuda_graph_disabled already judged the line's fact: shown, not alerted twice.
    assert [(f["severity"], f["evidence"]) for f in ledger] == [
        (
            "info",
            [
                UPGRADE,
                "new in this startup's log (on 4 ranks; already judged by "
                f"piecewise_cuda_graph_disabled): {pcg}",
            ],
        )
    ]


def test_the_seed_baseline_against_itself_is_no_alarm(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    journal = build_journal(seed_fixture_dir() / "journal.export", tmp_path / "j", "seed")
    scan_json(capsys, journal, tmp_path / "s")
    store = StateStore(tmp_path / "s")
    try:
        first = store.startups([UNIT])[0]
    finally:
        store.close()
    again = dataclasses.replace(first, invocation_id="f" * 32)
    assert first.ledger is not None
    kinds = [t["kind"] for t in first.ledger["templates"]]
    assert (kinds.count("downgrade"), kinds.count("other")) == (4, 28)
    c = compare(again, first, "pinned", POLICY)
    assert c.log_diff == NOTHING_NEW
    assert [f.check for f in c.findings] == []


def test_a_new_downgrade_line_no_rule_names_is_a_warning() -> None:
    base = run(startup(), "a" * 32)
    line = (
        "[2026-03-09 21:31:24 TP{tp}] CustomAllreduce is disabled because this process group "
        "spans across nodes."
    )
    now = run(startup(line.format(tp=0), line.format(tp=1)), "b" * 32)
    c = compare(now, base, "pinned", POLICY)
    assert [(f.check, f.severity) for f in c.findings] == [("new_downgrade_message", "warning")]
    assert c.findings[0].message == (
        "1 downgrade message the baseline never printed: CustomAllreduce is disabled because "
        "this process group spans across nodes."
    )
    assert c.log_diff is not None and c.log_diff["new"][0]["ranks"] == 2
    # Gone the other way round, and information only.
    back = compare(base, now, "pinned", POLICY)
    assert back.findings == ()
    assert back.log_diff is not None and [g["ranks"] for g in back.log_diff["gone"]] == [2]


def test_restarts_with_other_figures_and_lists_are_no_alarm() -> None:
    def lines(bs: str, mem: str, pid: int) -> list[str]:
        return startup(
            f"[2026-03-09 21:31:24 TP0] Disable prefill CUDA graph capture because no configured "
            f"capture size fits backend=full with max_capture_tokens={pid} (sizes {bs})",
            f"[2026-03-09 21:31:25 TP1] Using default MoE kernel config. Performance might be "
            f"sub-optimal! Config file not found at /opt/{pid}/E=256,N={mem},device_name=X.json",
            f"[2026-03-09 21:31:26 TP0] Max running requests is reset to {mem} for speculative "
            "decoding.",
        )

    base = run(lines("[1, 2, 4, 8, 12, 16]", "48", 412281), "a" * 32)
    now = run(lines("[1, 2]", "26", 9), "b" * 32)
    assert base.ledger is not None
    assert [t["kind"] for t in base.ledger["templates"]].count("downgrade") == 3
    assert new_templates(now, base) == []


def test_lines_after_ready_and_server_args_are_not_in_the_ledger() -> None:
    record = run(
        startup(
            "[2026-03-09 21:31:11] server_args=ServerArgs(disable_radix_cache=False, "
            "disable_cuda_graph=False)",
            after_ready=["[2026-03-09 21:40:00] Disabling something after ready"],
        ),
        "a" * 32,
    )
    assert record.ledger is not None
    assert [(t["kind"], t["template"]) for t in record.ledger["templates"]] == [
        ("other", "Attention backend not specified. Use flashinfer backend by default."),
        (
            "other",
            "max_total_num_tokens=<N>, chunked_prefill_size=<N>, max_prefill_tokens=<N>, "
            "max_running_requests=<N>, context_len=<N>, available_gpu_mem=<N>",
        ),
        ("other", "The server is fired up and ready to roll!"),
    ]
    window = startup()
    assert record.ledger["other"] == {
        "lines": 3,
        "chars": sum(map(len, window[:3])),
        "dropped": 0,
    }


def test_the_ledger_is_bounded_and_counts_what_it_dropped() -> None:
    extra = [
        f"[2026-03-09 21:31:24] Feature f{chr(97 + i // 26)}{chr(97 + i % 26)} is disabled"
        for i in range(TEMPLATES_KEPT + 5)
    ]
    record = run(startup(*extra), "a" * 32)
    assert record.ledger is not None
    kinds = [t["kind"] for t in record.ledger["templates"]]
    assert kinds.count("downgrade") == TEMPLATES_KEPT == 64
    assert record.ledger["dropped"] == 5
    assert kinds.count("other") == 3  # the other lines have their own bound


def test_a_full_ledger_lists_nothing_of_its_kind_as_gone() -> None:
    """A startup whose ledger dropped downgrade templates (more than TEMPLATES_KEPT new ones
    first) did print the baseline's later ones: they are not gone; other lines still compare."""
    known = "[2026-03-09 21:33:00 TP0] Using default MoE kernel config. Performance might be sub-optimal!"
    base = run(startup(known, "[2026-03-09 21:33:01] Graph ready"), "a" * 32)
    extra = [
        f"[2026-03-09 21:31:24] Feature f{chr(97 + i // 26)}{chr(97 + i % 26)} is disabled"
        for i in range(TEMPLATES_KEPT)
    ]
    now = run(startup(*extra, known), "b" * 32)
    assert now.ledger is not None and now.ledger["dropped"] == 1
    c = compare(now, base, "pinned", POLICY)
    assert c.log_diff is not None
    assert len(c.log_diff["new"]) == TEMPLATES_KEPT
    assert [line["template"] for line in c.log_diff["gone"]] == ["Graph ready"]


def test_downgrade_lines_the_ledger_did_not_keep_are_said_everywhere(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """More than TEMPLATES_KEPT new downgrade templates: the 64 kept are listed and the rest
    is counted in log_diff (scan --json), the finding's message, `diff --log` and the page,
    never left unsaid."""
    extra = [
        f"[2026-03-09 21:31:24] Feature f{chr(97 + i // 26)}{chr(97 + i % 26)} is disabled"
        for i in range(TEMPLATES_KEPT + 3)
    ]
    base = run(startup(), "a" * 32)
    now = run(startup(*extra), "b" * 32)
    c = compare(now, base, "pinned", POLICY)
    assert c.log_diff is not None
    assert len(c.log_diff["new"]) == TEMPLATES_KEPT
    assert c.log_diff["dropped"] == 3  # scan --json's log_diff is this dict (outputs.report)
    said = (
        "and 3 more not kept (downgrade lines of templates past the ledger's bound per "
        "startup, not compared)"
    )
    (finding,) = [f for f in c.findings if f.check == "new_downgrade_message"]
    assert finding.message == (
        "64 downgrade messages the baseline never printed: Feature faa is disabled; "
        f"Feature fab is disabled; Feature fac is disabled (+61 more), {said}"
    )
    assert render_log_diff(base, now, log_diff(now, base)).splitlines()[-1] == f"  new   {said}"
    html = render_page(
        [UnitStatus(UNIT, c, None, (base, now), False)], generated_at=1.8e9, version="t"
    )
    assert f"<li><em>{said.replace(chr(39), '&#x27;')}</em></li></ul>" in html


def test_other_lines_are_bounded_in_templates_and_in_lines_masked() -> None:
    """OTHER_KEPT other templates at most, and OTHER_LINES other lines masked at most (a
    startup that never becomes ready must not mask every line of its life); downgrade lines
    are taken all the same."""
    ledger = LogLedger()
    line = "[2026-03-09 21:31:24 TP{}] Step s{}"
    for i in range(OTHER_KEPT + 7):
        ledger.offer(line.format(0, chr(97 + i // 26) + chr(97 + i % 26)), (), "other")
    doc = ledger.to_doc()
    assert doc is not None
    assert len(doc["templates"]) == OTHER_KEPT == 128
    assert doc["other"] == {"lines": OTHER_KEPT + 7, "chars": 34 * (OTHER_KEPT + 7), "dropped": 7}
    while ledger.takes_other():
        ledger.offer(line.format(1, "aa"), (), "other")
    assert ledger.other_lines == OTHER_LINES == 1_000
    assert ledger.offer(line.format(2, "aa"), (), "other")  # past the budget: counted only
    assert ledger.offer("[2026-03-09 21:31:24] Feature x is disabled")
    doc = ledger.to_doc()
    assert doc is not None
    saa = [t for t in doc["templates"] if t["template"] == "Step saa"]
    assert saa[0]["ranks"] == ["TP0", "TP1"]
    assert doc["other"] == {
        "lines": OTHER_LINES + 1,
        "chars": 34 * (OTHER_LINES + 1),
        "dropped": 7 + 1,
    }
    assert doc["templates"][-1]["kind"] == "downgrade"


def test_long_other_lines_are_bounded_in_characters_masked() -> None:
    """Each other line counts up to the 4,000 characters it is redacted in, OTHER_CHARS in all."""
    ledger = LogLedger()
    n = 0
    while ledger.takes_other():
        ledger.offer(f"[2026-03-09 21:31:24] Step {n} " + "x" * 9000, (), "other")
        n += 1
    assert (n, ledger.other_chars, OTHER_CHARS) == (100, 400_000, 400_000)


def test_a_baseline_without_other_lines_compares_downgrades_only() -> None:
    """A baseline a release before the other kind recorded: its missing other lines are no
    news, and a new downgrade line is still one."""
    base = run(startup(), "a" * 32)
    now = run(startup("[2026-03-09 21:31:24] Feature x is disabled", "[x] Loaded it"), "b" * 32)
    assert base.ledger is not None
    old_doc = {
        "mask_version": 1,
        "templates": [
            {k: v for k, v in t.items() if k != "kind"}
            for t in base.ledger["templates"]
            if t["kind"] == "downgrade"
        ],
        "dropped": 0,
    }
    old = dataclasses.replace(base, ledger=old_doc)
    c = compare(now, old, "pinned", POLICY)
    assert c.log_diff is not None
    assert [(n["kind"], n["template"]) for n in c.log_diff["new"]] == [
        ("downgrade", "Feature x is disabled")
    ]
    assert c.log_diff["gone"] == []
    # Against a baseline that has them, the other new line is information, not a finding.
    c = compare(now, base, "pinned", POLICY)
    assert c.log_diff is not None
    assert [(n["kind"], n["template"]) for n in c.log_diff["new"]] == [
        ("downgrade", "Feature x is disabled"),
        ("other", "[x] Loaded it"),
    ]
    [f] = c.findings
    assert (f.check, f.current) == ("new_downgrade_message", ("Feature x is disabled",))
    # A builder restored from such a release's state goes on with downgrade lines only.
    restored = LogLedger.from_doc(old_doc)
    assert not restored.takes_other()
    assert not restored.offer("[2026-03-09 21:31:24] Loaded it", (), "other")


def test_a_baseline_recorded_before_the_ledger_is_no_false_alarm_and_says_so() -> None:
    now = run(startup("[2026-03-09 21:31:24] Feature x is disabled"), "b" * 32)
    old = dataclasses.replace(run(startup(), "a" * 32), ledger=None)
    c = compare(now, old, "pinned", POLICY)
    assert c.log_diff is None
    # Not a silent "nothing new": one info finding (never alerted) that says why.
    assert [(f.check, f.severity, f.message) for f in c.findings] == [
        (
            "new_downgrade_message",
            "info",
            "downgrade messages not compared with the baseline: it has no log templates "
            "(recorded by a release before the downgrade ledger; pin a newer startup)",
        )
    ]
    assert not alerting(c.findings[0])
    assert render_log_diff(old, now, None).splitlines()[1] == (
        "  no ledger for aaaaaaaa: it has no log templates (recorded by a release before the "
        "downgrade ledger; pin a newer startup); nothing to compare"
    )
    # A startup recorded without a ledger itself has nothing to compare: nothing to say.
    assert compare(dataclasses.replace(now, ledger=None), old, "pinned", POLICY).findings == ()
    # A record stored by an older release reads back without a ledger.
    doc = json.loads(record_to_json(now))
    del doc["ledger"]
    assert record_from_json(json.dumps(doc)).ledger is None
    assert LogLedger.from_doc(None).to_doc() is None


def test_accepted_messages_silence_a_template() -> None:
    base = run(startup(), "a" * 32)
    now = run(startup("[2026-03-09 21:31:24] Feature x is disabled"), "b" * 32)
    policy = load_policy(
        overrides={"new_downgrade_message": {"accepted_messages": ["^Feature x is"]}}
    )
    c = compare(now, base, "pinned", policy)
    assert c.findings == ()
    assert c.log_diff == NOTHING_NEW


def test_accepted_messages_must_be_regular_expressions() -> None:
    with pytest.raises(ConfigError) as caught:
        load_policy(overrides={"new_downgrade_message": {"accepted_messages": ["(unclosed"]}})
    assert caught.value.problems == [
        "config: policy.checks.new_downgrade_message.accepted_messages: '(unclosed' is not a "
        "regular expression: missing ), unterminated subpattern at position 0"
    ]


def test_the_example_line_is_redacted() -> None:
    base = run(startup(), "a" * 32)
    now = run(
        startup(
            "[2026-03-09 21:31:24] Fallback to default because api_key=sk-abcdefABCDEF123456 "
            "is not supported"
        ),
        "b" * 32,
    )
    c = compare(now, base, "pinned", POLICY)
    assert c.log_diff is not None
    example = c.log_diff["new"][0]["example"]
    assert "sk-abcdef" not in example and "<redacted>" in example


def test_the_ledger_survives_a_restart_of_the_tracker() -> None:
    tracker = StartupTracker(MemoMatcher(RULES))
    inv, t0 = "c" * 32, 1_000_000_000_000
    tracker.feed(
        [
            JournalEntry(
                UNIT, "[2026-03-09 21:31:24 TP0] Feature x is disabled", t0, invocation_id=inv
            )
        ],
        lambda: t0,
    )
    state = [text for _, text in tracker.take_dirty()]
    resumed = StartupTracker(MemoMatcher(RULES))
    resumed.restore(state)
    resumed.feed(
        [
            JournalEntry(
                UNIT, "[2026-03-09 21:31:24 TP1] Feature x is disabled", t0 + 1, invocation_id=inv
            )
        ],
        lambda: t0 + 1,
    )
    record = {r.invocation_id: r for r, _ in resumed.take_dirty()}[inv]
    assert record.ledger is not None
    assert record.ledger["templates"] == [
        {
            "template": "Feature x is disabled",
            "example": "Feature x is disabled",
            "ranks": ["TP0", "TP1"],
            "rules": [],
            "facts": [],
            "kind": "downgrade",
        }
    ]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 10**9), min_size=6, max_size=6),
    st.lists(st.integers(1, 512), min_size=1, max_size=12),
    st.floats(0, 1e4, allow_nan=False).map(lambda x: f"{x:.2f}"),
)
def test_figures_never_make_a_new_template(numbers: list[int], sizes: list[int], gb: str) -> None:
    """Any pid, figure, size list or path gives the template of the line it was rendered from."""
    a, b, c, d, e, f = numbers
    line = (
        f"Post-capture KV sizing: max_running_requests {a} -> {b}; pool {c} tokens, {gb} GB free, "
        f"bs {sizes} pid={d} at /tmp/{e}/cfg,N={f}.json"
    )
    assert template_of(line) == (
        "Post-capture KV sizing: max_running_requests <N> -> <N>; pool <N> tokens, <N> free, "
        "bs <LIST> pid=<N> at <PATH>"
    )


def test_a_capacity_drop_names_the_limit_sglang_logged() -> None:
    base = run(startup(mrr=48), "a" * 32)
    now = run(
        startup(
            "[2026-03-09 21:33:00 TP0] Post-capture KV sizing: max_running_requests 48 -> 40",
            mrr=40,
        ),
        "b" * 32,
    )
    assert now.facts["max_running_requests_limit"] == "post-capture KV sizing"
    assert now.facts["max_running_requests_limited_to"] == 40
    c = compare(now, base, "pinned", POLICY)
    [drop] = [f for f in c.findings if f.check == "max_running_requests_drop"]
    assert [e.detail for e in drop.evidence if e.kind == "note"] == [
        "SGLang logged a max_running_requests limit: post-capture KV sizing (40)"
    ]
    # The limit's line is new, and judged by the drop: shown, not alerted twice.
    [ledger] = [f for f in c.findings if f.check == "new_downgrade_message"]
    assert ledger.severity == "info"


def test_a_secret_reaches_neither_the_template_nor_the_example() -> None:
    ledger = LogLedger()
    secret = "AKIAIOSFODNN7EXAMPLE"
    assert ledger.offer(f"[2026-03-09 21:31:24] Fallback to anonymous: key {secret} not supported")
    doc = ledger.to_doc()
    assert doc is not None
    assert secret not in json.dumps(doc)
    assert doc["templates"][0]["template"] == "Fallback to anonymous: key <redacted> not supported"


def _generated(draw: st.DrawFn) -> list[str]:
    """One startup of a fixed configuration with its own figures (memory, load times, token
    counts), pids, rank order and request lines inside its window."""
    n = st.integers(1, 10**7)
    gb = st.floats(0.01, 200, allow_nan=False).map(lambda x: f"{x:.2f}")
    ranks = draw(st.permutations([0, 1, 2, 3]))
    ts = f"2026-03-{draw(st.integers(10, 28))} {draw(st.integers(10, 23))}:{draw(n) % 60:02d}:07"
    lines = [f"[{ts}] Attention backend not specified. Use flashinfer backend by default."]
    for tp in ranks:
        lines += [
            f"[{ts} TP{tp}] Custom allreduce is disabled because it's not supported on more than "
            "two PCIe-only GPUs. To silence this warning, specify disable_custom_all_reduce=True "
            "explicitly.",
            f"[{ts} TP{tp}] Load weight begin. avail mem={draw(gb)} GB",
            f"[{ts} TP{tp}] Loading safetensors checkpoint shards: {draw(n) % 100}% Completed | "
            f"{draw(n) % 40}/40 [00:{draw(n) % 60:02d}<00:10, {draw(gb)}it/s]",
            f"[{ts} TP{tp}] Load weight end. elapsed={draw(gb)} s, type=Qwen3MoeForCausalLM, "
            f"dtype=torch.bfloat16, avail mem={draw(gb)} GB, mem usage={draw(gb)} GB.",
            f"[{ts} TP{tp}] KV Cache is allocated. dtype: torch.bfloat16, #tokens: {draw(n)}, "
            f"K size: {draw(gb)} GB, V size: {draw(gb)} GB",
            f"[{ts} TP{tp}] Memory pool end. avail mem={draw(gb)} GB",
            f"[{ts} TP{tp}] Using default MoE kernel config. Performance might be sub-optimal! "
            f"Config file not found at /opt/{draw(n)}/configs/E=256,N={draw(n)},device_name=X.json",
            f"[{ts} TP{tp}] Capture cuda graph bs {sorted(draw(st.sets(n, min_size=1, max_size=9)))}",
        ]
    mrr, pid = draw(n), draw(n)
    lines += [
        f"[{ts} TP0] Max running requests is reset to {mrr} for speculative decoding.",
        f"[{ts} TP0] max_total_num_tokens={draw(n)}, chunked_prefill_size=8192, "
        f"max_prefill_tokens=16384, max_running_requests={mrr}, context_len=262144, "
        f"available_gpu_mem={draw(gb)} GB",
        f"[{ts}] INFO:     Started server process [{pid}]",
        f"[{ts}] INFO:     Waiting for application startup.",
        f"[{ts}] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
        f'[{ts}] INFO:     127.0.0.1:{draw(n)} - "GET /get_model_info HTTP/1.1" 200 OK',
        f"[{ts} TP0] Prefill batch. #new-seq: 1, #new-token: {draw(n)}, #cached-token: 0, "
        f"token usage: 0.00, #running-req: 0, #queue-req: 0, ",
        f'[{ts}] INFO:     127.0.0.1:{draw(n)} - "POST /generate HTTP/1.1" 200 OK',
        READY,
        f'[{ts}] INFO:     127.0.0.1:{draw(n)} - "POST /generate HTTP/1.1" 200 OK',
        f"[{ts}] Disabling something after ready, pid {draw(n)}",
    ]
    return lines


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_restarts_of_one_configuration_never_give_a_new_downgrade_message(
    data: st.DataObject,
) -> None:
    base = run(data.draw(st.composite(_generated)()), "a" * 32)
    now = run(data.draw(st.composite(_generated)()), "b" * 32)
    c = compare(now, base, "pinned", POLICY)
    assert c.log_diff == NOTHING_NEW
    assert "new_downgrade_message" not in [f.check for f in c.findings]


def test_an_upgrade_that_rewords_a_known_downgrade_is_no_alarm() -> None:
    """0.5.9's `Custom allreduce is disabled` is 0.5.10's `CustomAllreduce is disabled`: the
    rule names the same facts with the same values, so the line is not new; a new reason is."""
    reason = "because it's not supported on more than two PCIe-only GPUs."
    old = run(startup(f"[2026-03-09 21:31:24 TP0] Custom allreduce is disabled {reason}"), "a" * 32)
    new = run(startup(f"[2026-03-09 21:31:24 TP0] CustomAllreduce is disabled {reason}"), "b" * 32)
    assert compare(new, old, "pinned", POLICY).log_diff == NOTHING_NEW
    other = run(
        startup(
            "[2026-03-09 21:31:24 TP0] CustomAllreduce is disabled because this process group "
            "spans across nodes."
        ),
        "c" * 32,
    )
    assert new_templates(other, old) == [
        "CustomAllreduce is disabled because this process group spans across nodes."
    ]


def _args(*fields: str) -> str:
    """A server_args line of a release whose ServerArgs has these fields (and tp_size)."""
    return (
        "[2026-03-09 21:31:11] server_args=ServerArgs(tp_size=4, "
        + ", ".join(f"{f}=False" for f in fields)
        + ")"
    )


def test_a_version_change_is_said_once_and_alerts_only_on_new_downgrades() -> None:
    """0.5.9 -> 0.5.10 (other server_args fields): the diff and the finding say so once; a
    reworded message no rule names is new and gone, and the new one still a warning."""
    old = run(
        startup(_args("enable_piecewise_cuda_graph"), "[2026-03-09 21:31:24] Feature x disabled"),
        "a" * 32,
    )
    new = run(
        startup(
            _args("disable_piecewise_cuda_graph", "enable_dp_lm_head"),
            "[2026-03-09 21:31:24] Feature x is disabled",
        ),
        "b" * 32,
    )
    said = (
        "SGLang version changed (server_args fields: 2 added, 1 removed): a message the new "
        "release rewords shows as one new and one gone template"
    )
    c = compare(new, old, "pinned", POLICY)
    assert c.log_diff is not None
    assert c.log_diff["version_changed"] == said
    assert [line["template"] for line in c.log_diff["new"]] == ["Feature x is disabled"]
    assert [line["template"] for line in c.log_diff["gone"]] == ["Feature x disabled"]
    [f] = [f for f in c.findings if f.check == "new_downgrade_message"]
    assert f.severity == "warning"
    assert f.message == (
        "1 downgrade message the baseline never printed (the SGLang version changed): "
        "Feature x is disabled"
    )
    assert [e.detail for e in f.evidence] == [
        said,
        "new in this startup's log (on 1 rank): Feature x is disabled",
    ]
    assert render_log_diff(old, new, log_diff(new, old)).splitlines()[1:] == [
        f"  {said}",
        "  new   Feature x is disabled",
        "        e.g. Feature x is disabled  (1 rank)",
        "  gone  Feature x disabled",
        "        e.g. Feature x disabled  (1 rank)",
    ]
    # The same release (the same fields, other values) says nothing of a version.
    again = run(
        startup(
            _args("disable_piecewise_cuda_graph", "enable_dp_lm_head").replace("False", "True"),
        ),
        "c" * 32,
    )
    assert compare(again, new, "pinned", POLICY).log_diff == {
        "new": [],
        "gone": [
            {
                "template": "Feature x is disabled",
                "example": "Feature x is disabled",
                "ranks": 1,
                "kind": "downgrade",
            }
        ],
        "version_changed": None,
        "dropped": 0,
    }


def test_a_gone_downgrade_is_information_only_and_listed_everywhere() -> None:
    """The fallback a baseline printed and this startup does not: no finding, no alert, but
    in log_diff.gone (scan --json), `diff --log` and the page, with its example."""
    line = "[2026-03-09 21:31:24 TP{tp}] Custom allreduce is disabled because it's not supported"
    base = run(startup(line.format(tp=0), line.format(tp=1)), "a" * 32)
    now = run(startup(), "b" * 32)
    c = compare(now, base, "pinned", POLICY)
    assert c.findings == ()
    assert c.log_diff == {
        "new": [],
        "gone": [
            {
                "template": "Custom allreduce is disabled because it's not supported",
                "example": "Custom allreduce is disabled because it's not supported",
                "ranks": 2,
                "kind": "downgrade",
            }
        ],
        "version_changed": None,
        "dropped": 0,
    }
    html = render_page(
        [UnitStatus(UNIT, c, None, (base, now), False)], generated_at=1.8e9, version="t"
    )
    assert (
        '<h3>Gone since the baseline (information)</h3><ul class="log-gone"><li><code>Custom '
        "allreduce is disabled because it&#x27;s not supported</code> <em>(2 ranks)</em></li>"
    ) in html
    assert render_log_diff(base, now, log_diff(now, base)).splitlines()[1:] == [
        "  gone  Custom allreduce is disabled because it's not supported",
        "        e.g. Custom allreduce is disabled because it's not supported  (2 ranks)",
    ]


def test_diff_log_lists_downgrades_first_and_marks_other_lines() -> None:
    base = run(startup(), "a" * 32)
    now = run(
        startup(
            "[2026-03-09 21:31:20] Loaded 3 adapters", "[2026-03-09 21:31:24] Feature x is disabled"
        ),
        "b" * 32,
    )
    assert render_log_diff(base, now, log_diff(now, base)).splitlines()[1:] == [
        "  new   Feature x is disabled",
        "        e.g. Feature x is disabled  (1 rank)",
        "  new   (other) Loaded <N> adapters",
        "        e.g. Loaded 3 adapters  (1 rank)",
    ]
    # Only the downgrade line is the finding (and the metric): the other one is information.
    [f] = compare(now, base, "pinned", POLICY).findings
    assert (f.check, f.current) == ("new_downgrade_message", ("Feature x is disabled",))


@pytest.mark.parametrize("filler", ["x", "api_key=sk-" + "Zq9" * 300 + " "])
def test_a_long_line_is_redacted_before_its_cut(filler: str) -> None:
    """A 48 KiB line is redacted in its first part only; a secret that part cut in two is
    never kept, also when earlier redactions shortened the text (then all of it is)."""
    secret = "sk-" + "A1b2C3d4" * 10
    head = (filler * (4000 // len(filler) + 1))[: 4000 - 40]
    line = "[2026-03-09 21:31:24] Disabled " + head + " key " + secret + " tail" * 9000
    ledger = LogLedger()
    assert ledger.offer(line)
    text = json.dumps(ledger.to_doc())
    assert all(secret[i : i + 12] not in text for i in range(len(secret) - 12))
    assert "Zq9Zq9" not in text


def _clean_startup(version: str, day: int) -> list[str]:
    """A clean startup (no downgrade of its own) of one configuration, Qwen3-30B-A3B at TP4 on
    PCIe-only GPUs, in the templates its SGLang release prints (research: the seed fixture's
    0.5.9 and 0.5.10rc0 startups, sglang-log-facts §3.5/§5.3 and the 0.5.23 golden cases):
    the lines a downgrade word is in (custom all-reduce off on PCIe, the default MoE configs)
    are the same downgrade each time, in each release's wording."""
    ts = f"2026-03-{day:02d} 10:00"
    file_line = {"0.5.9": "1835", "0.5.10": "2250", "0.5.23": "1136"}[version]
    triton = {"0.5.9": "3_4_0", "0.5.10": "3_5_0", "0.5.23": "3_5_1"}[version]
    args = {
        "0.5.9": "server_args=ServerArgs(model_path='/models/Qwen3-30B-A3B', tp_size=4, "
        "enable_piecewise_cuda_graph=False, cuda_graph_max_bs=None, disable_custom_all_reduce=False)",
        "0.5.10": "server_args=ServerArgs(model_path='/models/Qwen3-30B-A3B', tp_size=4, "
        "disable_piecewise_cuda_graph=False, enforce_piecewise_cuda_graph=False, "
        "cuda_graph_max_bs=None, disable_custom_all_reduce=False)",
        "0.5.23": "server_args={'model_path': '/models/Qwen3-30B-A3B', 'tp_size': 4, "
        "'cuda_graph_config': {'decode': {'backend': 'full'}, 'prefill': {'backend': "
        "'breakable'}}, 'disable_custom_all_reduce': False}",
    }[version]
    allreduce = "Custom allreduce" if version == "0.5.9" else "CustomAllreduce"
    moe = (
        f"/opt/sglang/.venv/lib/python3.12/site-packages/sglang/srt/layers/moe/fused_moe_triton/"
        f"configs/triton_{triton}/E=128,N=192,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_"
        "Edition.json"
    )
    lines = [
        f"[{ts}:01] INFO server_args.py:{file_line}: Attention backend not specified. Use "
        "flashinfer backend by default.",
        f"[{ts}:02] {args}",
    ]
    for tp in (0, 2, 1, 3):
        lines += [
            f"[{ts}:05 TP{tp}] Init torch distributed begin.",
            f"[{ts}:06 TP{tp}] {allreduce} is disabled because it's not supported on more than "
            "two PCIe-only GPUs. To silence this warning, specify disable_custom_all_reduce=True "
            "explicitly.",
            f"[{ts}:07 TP{tp}] Load weight begin. avail mem=93.{day:02d} GB",
        ]
    for tp in range(4):
        dtype = "dtype=torch.bfloat16, " if version == "0.5.9" else ""
        lines += [
            f"[{ts}:30 TP{tp}] Load weight end. elapsed=2{tp}.{day} s, type=Qwen3MoeForCausalLM, "
            f"{dtype}avail mem=62.1{tp} GB, mem usage=31.0{day % 10} GB.",
            f"[{ts}:31 TP{tp}] KV Cache is allocated. #tokens: 5070{day}, K size: 10.0{tp} GB, "
            "V size: 10.00 GB",
        ]
        if version == "0.5.23":
            lines += [
                f"[{ts}:32 TP{tp}] Capture target prefill CUDA graph begin. backend=breakable, "
                "num_tokens=[8, 16], avail mem=26.90 GB",
                f"[{ts}:40 TP{tp}] Capture target decode CUDA graph begin. backend=full, "
                "num_tokens_per_req=1, avail mem=26.00 GB",
            ]
        else:
            lines.append(
                f"[{ts}:32 TP{tp}] Capture cuda graph begin. This can take up to several "
                "minutes. avail mem=21.19 GB"
            )
        lines += [
            f"[{ts}:35 TP{tp}] Using default MoE kernel config. Performance might be "
            f"sub-optimal! Config file not found at {moe}",
            f"[{ts}:35 TP{tp}] Using MoE kernel config with down_moe=False. Performance might "
            f"be sub-optimal! Config file not found at {moe.replace('.json', '_down.json')}",
        ]
    lines += [
        f"[{ts}:50 TP0] max_total_num_tokens=5070{day}, chunked_prefill_size=8192, "
        "max_prefill_tokens=16384, max_running_requests=48, context_len=40960, "
        "available_gpu_mem=20.64 GB",
        f"[{ts}:52] INFO:     Started server process [4{day}877]",
        f'[{ts}:53] INFO:     127.0.0.1:553{day} - "GET /model_info HTTP/1.1" 200 OK',
        f"[{ts}:55] The server is fired up and ready to roll!",
    ]
    return lines


def test_an_upgrade_without_a_downgrade_gives_no_new_downgrade_message() -> None:
    """0.5.9 -> 0.5.10 -> 0.5.23 of one unit with the same configuration and no downgrade of
    its own: the downgrade lines every release prints on this host (custom all-reduce off on
    PCIe, reworded in 0.5.10; the default MoE configs) are not new, against the previous
    startup nor against a 0.5.9 pin; what each release prints otherwise is information."""
    v059, v0510, v0523 = (
        run(_clean_startup(version, day), inv, t0=day * 10**14)
        for version, day, inv in (
            ("0.5.9", 10, "a" * 32),
            ("0.5.10", 11, "b" * 32),
            ("0.5.23", 12, "c" * 32),
        )
    )
    for now, base in ((v0510, v059), (v0523, v0510), (v0523, v059)):
        assert now.facts["custom_all_reduce"] is False
        c = compare(now, base, "pinned", POLICY)
        assert c.log_diff is not None
        assert c.log_diff["version_changed"] is not None
        assert [line for line in c.log_diff["new"] if line["kind"] == "downgrade"] == []
        assert [f for f in c.findings if f.check == "new_downgrade_message"] == []
    # What the release prints otherwise is information: 0.5.10's Load weight end lost its dtype.
    c = compare(v0510, v059, "pinned", POLICY)
    assert c.log_diff is not None
    assert [(line["kind"], line["template"]) for line in c.log_diff["new"]] == [
        (
            "other",
            "Load weight end. elapsed=<N>, type=Qwen3MoeForCausalLM, avail mem=<N>, mem usage=<N>.",
        )
    ]


def test_a_full_ledger_with_nothing_new_kept_says_what_it_did_not_compare() -> None:
    """The baseline printed the 64 templates this startup keeps, and this startup printed 3
    more downgrade lines past the bound: an info finding says they were not compared (not an
    alert: both startups are that noisy). Before: no finding at all, a silent "nothing new"
    over lines the sentinel never looked at."""
    kept = [
        f"[2026-03-09 21:31:24] Feature f{chr(97 + i // 26)}{chr(97 + i % 26)} is disabled"
        for i in range(TEMPLATES_KEPT)
    ]
    more = [f"[2026-03-09 21:31:25] Option o{chr(97 + i)} is disabled" for i in range(3)]
    base = run(startup(*kept), "a" * 32)
    now = run(startup(*kept, *more), "b" * 32)
    c = compare(now, base, "pinned", POLICY)
    assert c.log_diff is not None
    assert c.log_diff["new"] == [] and c.log_diff["dropped"] == 3
    (finding,) = [f for f in c.findings if f.check == "new_downgrade_message"]
    assert finding.severity == "info"
    assert finding.message == (
        "no downgrade message the baseline never printed among those kept, and 3 more not kept"
        " (downgrade lines of templates past the ledger's bound per startup, not compared)"
    )


# Letters with case variants, some of which fold beyond ASCII (the long s ~ `s`, Kelvin ~ `k`,
# `İ`, `ß`, `Σ`/`ς`), around the ASCII ones the pack's words use.
_CASED = "aAbBkKsSıİiIſKßẞσςΣéÉ -_."
_words = st.lists(st.text(st.sampled_from(_CASED), min_size=1, max_size=6), max_size=5)
_text = st.text(st.sampled_from(_CASED + "xyz\u00e0\x00"), max_size=40)


@settings(max_examples=400)
@given(_words, _text)
def test_the_downgrade_word_test_is_the_case_blind_search(words: list[str], line: str) -> None:
    """The vocabulary's fast tests (lowered copies) answer what re.IGNORECASE answers: raw bytes
    (ASCII folding), text of ASCII words and lines, and text that folds beyond ASCII."""
    vocabulary = Vocabulary(tuple(words))
    alternation = "|".join(re.escape(w) for w in sorted(set(words), key=len))
    text = re.compile(alternation, re.IGNORECASE) if alternation else None
    raw = re.compile(alternation.encode(), re.IGNORECASE) if alternation else None
    assert vocabulary.hits(line) == (text is not None and text.search(line) is not None)
    data = line.encode("utf-8", "surrogateescape")
    expected = raw is not None and raw.search(data) is not None
    assert vocabulary.hits(data) == expected
    search = vocabulary.raw_search
    assert (search is not None and bool(search(data))) == expected


def test_a_long_line_s_downgrade_word_test_is_cheap() -> None:
    """A 48 KiB startup-window line costs the word test a few ms of CPU, not the 12 ms a
    case-blind sre alternation took (the hostile-lines test's worst line was this test)."""
    vocabulary = StartupTracker(MemoMatcher(load_rules([default_rules_dir()]))).vocabulary()
    piece = b"[2026-03-09 21:32:38 TP3] Using hybrid linear attention"
    line = (piece * (49152 // len(piece) + 1))[:49152]
    search = vocabulary.raw_search
    assert search is not None
    start = time.thread_time()
    for _ in range(10):
        assert not search(line)
    per_line = (time.thread_time() - start) / 10
    assert per_line < 0.006, per_line


@pytest.mark.parametrize(
    "line",
    [
        # SGLang 0.5.23's capacity cuts that no word of the pack named (their calls in the
        # released wheel: scheduler.py:2702, deep_gemm_wrapper/compile_utils.py:237,
        # mem_cache/storage/umbp/umbp_store.py:849, models/qwen4_exp_ple_table.py:313).
        "Capping max_new_tokens of request 3f2a to SGLANG_MAX_NEW_TOKENS_LIMIT=4096 "
        "(requested: 8192).",
        "Available memory 3GB is less than required memory 5GB for warmup, reducing max_m to "
        "1024 to avoid out of memory",
        "UMBPStore: tenant_quota_bytes=100 × dp_size=8 = 800 exceeds ssd_capacity=500. "
        "Reduced to 62 to avoid SPDK proxy NO_SPACE",
        "PLE table: resident set capped at 7.5 GiB, checked every 8 s",
    ],
)
def test_capacity_cuts_worded_without_the_older_words_are_downgrades(line: str) -> None:
    vocabulary = StartupTracker(MemoMatcher(load_rules([default_rules_dir()]))).vocabulary()
    assert vocabulary.hits(line)
    assert vocabulary.hits(f"[2026-11-15 10:00:32 TP0] {line}".encode())
