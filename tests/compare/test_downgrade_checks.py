"""The downgrade checks of rules/60-downgrades.yaml's facts: the overlap scheduler off (also when
only the resolved server_args says so), MoE configs of another Triton version, and block
FP8/INT8 GEMM shapes on the default config, each named."""

from __future__ import annotations

from collections.abc import Sequence

from sglang_sentinel.compare import compare, load_policy
from sglang_sentinel.model import UNIT_STARTED, Finding, JournalEntry, StartupRecord
from sglang_sentinel.rules import MemoMatcher, default_rules_dir, load_rules
from sglang_sentinel.startups import LIST_KEPT, StartupTracker

UNIT = "sglang-lfm.service"
RULES = load_rules([default_rules_dir()])
POLICY = load_policy()
CMD = "/opt/sglang/bin/python3 -m sglang.launch_server --model-path /models/LFM2 --tp-size 1"
READY = "[2026-10-30 12:02:00] The server is fired up and ready to roll!"
SUMMARY = (
    "[2026-10-30 12:01:50 TP0] max_total_num_tokens=507050, chunked_prefill_size=8192, "
    "max_prefill_tokens=16384, max_running_requests=48, context_len=32768, "
    "available_gpu_mem=20.64 GB"
)
MOE_FALLBACK = (
    "[2026-10-30 12:01:14 TP0] Config file not found at /opt/sglang/configs/triton_3_6_0/{f}. "
    "Fallback to triton version 3.5.1 and use MoE kernel config from "
    "/opt/sglang/configs/triton_3_5_1/{f}. Performance might be sub-optimal!"
)
BLOCK = (
    "[2026-10-30 12:01:20 TP{tp}] Using default W8A8 Block FP8 kernel config. Performance "
    "might be sub-optimal! Config file not found at /opt/sglang/srt/layers/quantization/"
    "configs/N={n},K=7168,device_name=NVIDIA_H20,dtype=fp8_w8a8,block_shape=[128, 128].json"
)


def server_args(disable_overlap: bool) -> str:
    return (
        "[2026-10-30 12:00:01] server_args=ServerArgs(model_path='/models/LFM2', tp_size=1, "
        f"disable_overlap_schedule={disable_overlap}, disable_cuda_graph=False)"
    )


def run(lines: Sequence[str], inv: str, cmdline: str = CMD) -> StartupRecord:
    """One startup through a fresh tracker (its first line an entry with the command line)."""
    tracker = StartupTracker(MemoMatcher(RULES))
    t0 = 1_000_000_000_000
    started = JournalEntry(
        UNIT, "Started sglang", t0, invocation_id=inv, from_pid1=True, message_id=UNIT_STARTED
    )
    first = JournalEntry(UNIT, lines[0], t0 + 1, invocation_id=inv, cmdline=cmdline)
    tracker.feed([started, first, *(line.encode() for line in lines[1:])], lambda: t0 + 2)
    return {r.invocation_id: r for r, _ in tracker.take_dirty()}[inv]


def startup(*extra: str, disable_overlap: bool = False) -> list[str]:
    return [server_args(disable_overlap), *extra, SUMMARY, READY]


def findings(now: StartupRecord, base: StartupRecord, check: str) -> list[Finding]:
    return [f for f in compare(now, base, "pinned", POLICY).findings if f.check == check]


def test_the_silent_0523_overlap_off_is_read_from_the_resolved_server_args() -> None:
    base = run(startup(), "a" * 32)
    now = run(startup(disable_overlap=True), "b" * 32)
    assert (base.facts["overlap_schedule"], now.facts["overlap_schedule"]) == (True, False)
    [f] = findings(now, base, "overlap_schedule_disabled")
    assert (f.severity, f.baseline, f.current) == ("warning", True, False)
    assert f.message == (
        "overlap scheduler on → off; disable_overlap_schedule=True not on the command line: "
        "set by SGLang"
    )
    assert f.evidence[0].detail == (
        "no line said why: only the resolved server_args shows it (0.5.23 turns the overlap "
        "scheduler off for a mamba model's no_buffer radix cache silently)"
    )
    # Nothing else: the server_args change is the finding's evidence, not another finding.
    assert [x.check for x in compare(now, base, "pinned", POLICY).findings] == [
        "overlap_schedule_disabled"
    ]


def test_overlap_off_by_the_command_line_says_so() -> None:
    base = run(startup(), "a" * 32)
    now = run(startup(disable_overlap=True), "b" * 32, CMD + " --disable-overlap-schedule")
    [f] = findings(now, base, "overlap_schedule_disabled")
    assert f.message == (
        "overlap scheduler on → off; disable_overlap_schedule=True: --disable-overlap-schedule "
        "is on the command line"
    )


def test_overlap_off_with_a_reason_line_carries_the_reason() -> None:
    base = run(startup(), "a" * 32)
    line = (
        "[2026-10-30 12:00:01] WARNING server_args.py:2192: Disabling overlap schedule since "
        "mamba no_buffer is not compatible with overlap schedule, try to use "
        "--disable-radix-cache if overlap schedule is necessary"
    )
    now = run(startup(line, disable_overlap=True), "b" * 32)
    [f] = findings(now, base, "overlap_schedule_disabled")
    assert [(e.kind, e.field, e.new) for e in f.evidence[:1]] == [
        (
            "logged_by_sglang",
            "overlap_schedule_disabled_reason",
            "mamba no_buffer is not compatible with overlap schedule",
        )
    ]
    # The reason line is new in the log, and judged by this finding: shown, not alerted twice.
    [ledger] = findings(now, base, "new_downgrade_message")
    assert ledger.severity == "info"


def test_overlap_on_in_both_or_off_in_both_is_no_finding() -> None:
    on, off = run(startup(), "a" * 32), run(startup(disable_overlap=True), "b" * 32)
    assert findings(on, on, "overlap_schedule_disabled") == []
    assert findings(off, off, "overlap_schedule_disabled") == []
    assert findings(on, off, "overlap_schedule_disabled") == []  # off → on is good news


def test_a_moe_config_fallback_has_a_judgement_of_its_own() -> None:
    old = "E=8,N=2048,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json"
    new = "E=256,N=256,device_name=NVIDIA_H100_80GB_HBM3.json"
    base = run(startup(MOE_FALLBACK.format(f=old)), "a" * 32)
    now = run(startup(MOE_FALLBACK.format(f=old), MOE_FALLBACK.format(f=new)), "b" * 32)
    [f] = findings(now, base, "moe_config_fallback")
    assert (f.severity, f.baseline, f.current) == ("warning", (old,), (old, new))
    assert f.message == (
        "Triton MoE kernel config of another Triton version used (none for this one, "
        f'"sub-optimal"): {new}'
    )
    # The same fallback as the baseline's is no finding; nor is it a MoE config missing.
    assert findings(base, base, "moe_config_fallback") == []
    assert findings(now, base, "moe_config_missing") == []
    # The ledger cannot tell: both lines mask to the baseline's template (the path is masked).
    assert findings(now, base, "new_downgrade_message") == []


def test_block_gemm_configs_missing_name_each_new_shape() -> None:
    base = run(startup(BLOCK.format(tp=0, n=2112)), "a" * 32)
    now = run(
        startup(
            BLOCK.format(tp=0, n=2112),
            BLOCK.format(tp=0, n=24576),
            BLOCK.format(tp=1, n=24576),
            BLOCK.format(tp=0, n=32768),
        ),
        "b" * 32,
    )
    name = "N={},K=7168,device_name=NVIDIA_H20,dtype=fp8_w8a8,block_shape=[128, 128].json"
    assert now.facts["block_gemm_config_missing"] == tuple(
        name.format(n) for n in (2112, 24576, 32768)
    )
    [f] = findings(now, base, "block_gemm_config_missing")
    assert f.severity == "warning"
    assert f.message == (
        'W8A8 block FP8/INT8 GEMM config missing (default kernel config, "sub-optimal"): '
        f"{name.format(24576)}, {name.format(32768)}"
    )
    assert findings(base, base, "block_gemm_config_missing") == []


def test_a_list_fact_and_its_finding_are_bounded() -> None:
    base = run(startup(), "a" * 32)
    now = run(startup(*(BLOCK.format(tp=0, n=n) for n in range(1, LIST_KEPT + 11))), "b" * 32)
    shapes = now.facts["block_gemm_config_missing"]
    assert isinstance(shapes, tuple) and len(shapes) == LIST_KEPT == 64
    [f] = findings(now, base, "block_gemm_config_missing")
    assert f.current == shapes
    assert f.message.endswith(
        "N=8,K=7168,device_name=NVIDIA_H20,dtype=fp8_w8a8,block_shape=[128, 128].json "
        "(+56 more: sentinel diff)"
    )
    assert f.message.count(".json") == 8
