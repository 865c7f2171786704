"""Lines as other tools wrap them, and the reason a start died (issue 19 items 3 and 4).

Wrappers: docker/kubectl/CRI times, Docker Desktop's local time, Ray actor prefixes and docker
compose's service column are stripped before any rule, on both matcher paths; any other line is
left as it is. Reasons: a failure reason that names no error is replaced by the exception the
scheduler's traceback ends with. The lines are real ones from tests/fixtures/reallogs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from journaltools import StartupScript, build_journal, write_export

from sglang_sentinel.cli import main
from sglang_sentinel.model import Rank
from sglang_sentinel.rules.files import default_rules_dir, load_rules
from sglang_sentinel.rules.matcher import ExactMatcher, MemoMatcher
from sglang_sentinel.rules.ruleset import RuleSet
from sglang_sentinel.rules.shapes import split_prefix, strip_wrappers

SUMMARY = (
    "[2026-09-23 08:24:42 DP0 TP0] max_total_num_tokens=2226368, chunked_prefill_size=8192, "
    "max_prefill_tokens=16384, max_running_requests=16, context_len=1048576, "
    "available_gpu_mem=39.67 GB"
)
BATCH = (
    "[2026-02-04 11:30:33] Decode batch, #running-req: 1, #token: 60, token usage: 0.00, "
    "cuda graph: True, gen throughput (token/s): 5.91, #queue-req: 0"
)
WRAPPERS = [
    "2026-09-23T08:24:42.655136271Z ",  # docker logs -t, kubectl logs --timestamps
    "2026-09-23T08:24:42.655136271+02:00 ",
    "2026-09-23T08:24:42.655136271Z stdout F ",  # CRI log file (/var/log/pods)
    "2026-09-23T08:24:42Z stderr P ",
    "2026-09-23 08:24:42 ",  # Docker Desktop
    "(SGLangEngine pid=206831) ",  # Ray actor
    "(SGLangEngine pid=111711, ip=10.15.36.1) ",
    "sglang-1  | ",  # docker compose
    "2025-03-07 23:50:27,531 - __main__ - INFO - ",  # another Python logger (olmocr)
    "2026-09-23T08:24:42.655136271Z (SGLangEngine pid=206831) ",  # two of them
]
UNWRAPPED = [
    "2025-05-02 16:14:33,560 - INFO - flashinfer.jit: Prebuilt kernels not found",
    "(the server is up) The server is fired up and ready to roll!",
    "Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:03<00:00,  1.31it/s]",
    "2026-09-23T08:24:42Z",
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
    "KeyError: 'gate_up_proj_moe'",
]


@pytest.mark.parametrize("wrapper", WRAPPERS)
def test_a_wrapped_sglang_line_splits_like_the_bare_line(wrapper: str) -> None:
    body, rank = split_prefix(wrapper + SUMMARY)
    assert (body, rank) == split_prefix(SUMMARY)
    assert rank == Rank(dp=0, tp=0)
    assert strip_wrappers(wrapper + SUMMARY) == SUMMARY


def test_a_0_3_line_without_a_date_splits_like_a_dated_one() -> None:
    """Up to 0.3.x the prefix was `[HH:MM:SS TPn] ` (real, sgl-project/sglang#1479)."""
    assert split_prefix("[23:17:08 TP4] Exception in run_tp_server:") == (
        "Exception in run_tp_server:",
        Rank(tp=4),
    )
    assert split_prefix("[23:17:03] server_args=ServerArgs(tp_size=8)") == (
        "server_args=ServerArgs(tp_size=8)",
        Rank(),
    )
    for other in ("[23:17] Exception in run_tp_server:", "[2:17:08 TP4] x", "[23:17:08TP4] x"):
        assert split_prefix(other) == (other, Rank())


@pytest.mark.parametrize("line", UNWRAPPED)
def test_a_line_that_is_not_wrapped_is_unchanged(line: str) -> None:
    assert strip_wrappers(line) == line
    assert split_prefix(line) == (line, Rank())


@pytest.fixture(scope="module")
def rules() -> RuleSet:
    return load_rules([default_rules_dir()])


@pytest.mark.parametrize("wrapper", WRAPPERS)
@pytest.mark.parametrize("line", [SUMMARY, BATCH, "KeyError: 'gate_up_proj_moe'"])
def test_both_matchers_read_a_wrapped_line_as_the_bare_one(
    rules: RuleSet, wrapper: str, line: str
) -> None:
    exact, memo = ExactMatcher(rules), MemoMatcher(rules)
    bare = exact.match_line(line.encode())
    assert bare, "the bare line matches a rule"
    for _ in range(2):  # the second time from the memo
        got = memo.match_line((wrapper + line).encode())
        if not isinstance(got, list):  # a deferred batch line: its facts are read from the raw line
            got = exact.match_line((wrapper + line).encode())
        assert got == bare
    assert exact.match_line((wrapper + line).encode()) == bare


def _journal(tmp_path: Path, scripts: list[StartupScript]) -> Path:
    entries = [e for s in scripts for e in s.entries()]
    entries.sort(key=lambda e: int(e["__REALTIME_TIMESTAMP"]))
    export = write_export(entries, tmp_path / "j.export")
    return build_journal(export, tmp_path / "journal")


def _scan(capsys: pytest.CaptureFixture[str], journal: Path, tmp_path: Path) -> dict[str, Any]:
    units = [a for unit in sorted(REASONS) for a in ("--unit", f"sglang-{unit}.service")]
    argv = ["scan", "--journal-dir", str(journal), "--state-dir", str(tmp_path / "s"), "--json"]
    code = main([*argv, *units])
    out, err = capsys.readouterr()
    assert code == 0, err
    return {s["unit"][7:-8]: s for s in json.loads(out)["startups"]}


HEAD = "[2026-03-05 10:24:01 TP1] Scheduler hit an exception: Traceback (most recent call last):"
FRAME = '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 3130, in run_scheduler_process'
SIGQUIT = "[2026-03-05 10:24:02] Received sigquit from a child process. It usually means the child failed."
# unit -> (its lines, the failure reason recorded; None: the start did not fail)
REASONS: dict[str, tuple[list[str], str | None]] = {
    "last-line": (
        [HEAD, FRAME, "KeyError: 'gate_up_proj_moe'", SIGQUIT],
        "KeyError: 'gate_up_proj_moe'",
    ),
    "bare-assert": ([HEAD, FRAME, "AssertionError", SIGQUIT], "AssertionError"),
    "sigquit-first": (
        [SIGQUIT, HEAD, FRAME, "RuntimeError: SGLang only supports sm75 and above."],
        "RuntimeError: SGLang only supports sm75 and above.",
    ),
    "exception-then-dead-rank": (
        [
            "zmq.error.ZMQError: Address already in use (addr='tcp://*:32765')",
            "RuntimeError: Rank 0 scheduler died during initialization (exit code: -3)",
        ],
        "zmq.error.ZMQError: Address already in use (addr='tcp://*:32765')",
    ),
    "chained-last-exception": (
        [
            HEAD,
            FRAME,
            "KeyError: 'layers.0.mlp.experts.w13_weight'",
            "During handling of the above exception, another exception occurred:",
            "Traceback (most recent call last):",
            FRAME,
            "RuntimeError: failed to load the checkpoint",
            SIGQUIT,
        ],
        "RuntimeError: failed to load the checkpoint",
    ),
    # Reconstructed: an offline start whose model is not in the Hugging Face cache. The scheduler
    # builds its model config with transformers' AutoConfig; `cached_file` (transformers
    # utils/hub.py) raises this OSError `from` huggingface_hub's LocalEntryNotFoundError (texts
    # as those libraries write them); then the main process's own line.
    "chained-direct-cause": (
        [
            HEAD,
            '  File "/usr/local/lib/python3.12/dist-packages/huggingface_hub/file_download.py", '
            "line 1533, in _raise_on_head_call_error",
            "    raise LocalEntryNotFoundError(",
            "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find the requested files in "
            "the disk cache and outgoing traffic has been disabled. To enable hf.co look-ups and "
            "downloads online, set 'local_files_only' to False.",
            "",
            "The above exception was the direct cause of the following exception:",
            "",
            "Traceback (most recent call last):",
            FRAME,
            '  File "/usr/local/lib/python3.12/dist-packages/transformers/utils/hub.py", '
            "line 470, in cached_file",
            "    raise EnvironmentError(",
            "OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't "
            "find it in the cached files and it looks like zai-org/GLM-4.5-FP8 is not the path to "
            "a directory containing a file named config.json.",
            "Checkout your internet connection or see how to run the library in offline mode at "
            "'https://huggingface.co/docs/transformers/installation#offline-mode'.",
            "",
            SIGQUIT,
        ],
        "OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't "
        "find it in the cached files and it looks like zai-org/GLM-4.5-FP8 is not the path to a "
        "directory containing a file named config.json.",
    ),
    "chained-then-main-process-traceback": (
        [
            HEAD,
            FRAME,
            "RuntimeError: ninja exited with status 1",
            "During handling of the above exception, another exception occurred:",
            "Traceback (most recent call last):",
            FRAME,
            "Exception: JIT kernel build failed",
            "Traceback (most recent call last):",
            '  File "/sgl/python/sglang/srt/entrypoints/engine.py", line 1275, in _wait_for_scheduler_ready',
            "EOFError",
        ],
        "Exception: JIT kernel build failed",
    ),
    "chained-rule-reason": (
        [
            HEAD,
            FRAME,
            "RuntimeError: ninja exited with status 1",
            "During handling of the above exception, another exception occurred:",
            "Traceback (most recent call last):",
            FRAME,
            "Exception: Capture cuda graph failed: ninja exited with status 1",
            SIGQUIT,
        ],
        "Capture cuda graph failed: ninja exited with status 1",
    ),
    "v03-tp-server-exception": (
        [
            "[23:17:08 TP4] Exception in run_tp_server:",
            "Traceback (most recent call last):",
            FRAME,
            "RuntimeError: CUDA error: out of memory",
        ],
        "RuntimeError: CUDA error: out of memory",
    ),
    "oom-stays-constant": (
        [HEAD, FRAME, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."],
        "torch.OutOfMemoryError: CUDA out of memory",
    ),
    "redacted": (
        [HEAD, FRAME, "ValueError: cannot reach https://user:hunter2@hub.example.com/models"],
        "ValueError: cannot reach https://user:<redacted>@hub.example.com/models",
    ),
    "warning-traceback-then-ready": (
        [
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3/dist-packages/torchcodec/_core/ops.py", line 57, in load',
            "RuntimeError: Could not load libtorchcodec.",
            "[2026-03-05 10:25:01] The server is fired up and ready to roll!",
        ],
        None,
    ),
    "earlier-exception-is-not-blamed": (
        [
            "RuntimeError: Could not load libtorchcodec.",
            "[2026-03-05 10:23:30 TP0] Load weight begin. avail mem=78.50 GB",
            "[2026-03-05 10:24:01] Rank 0 scheduler died during initialization (exit code: -9)",
        ],
        "Rank 0 scheduler died during initialization (exit code: -9)",
    ),
    "ray-wrapped": (
        [
            "(SGLangEngine pid=206831) " + HEAD,
            "(SGLangEngine pid=206831) " + FRAME,
            "(SGLangEngine pid=206831) AttributeError: 'FusedMoE' object has no attribute 'w13_weight'",
        ],
        "AttributeError: 'FusedMoE' object has no attribute 'w13_weight'",
    ),
}


def test_the_failure_reason_is_the_exception_the_traceback_ends_with(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    scripts = []
    for unit, (lines, _) in sorted(REASONS.items()):
        s = StartupScript(unit=f"sglang-{unit}.service", start="2026-03-05 10:23:00")
        s.started("2026-03-05 10:23:00")
        s.lines(lines)
        scripts.append(s)
    got = _scan(capsys, _journal(tmp_path, scripts), tmp_path)
    assert {u: got[u]["failure_reason"] for u in REASONS} == {
        u: reason for u, (_, reason) in REASONS.items()
    }
    assert {u: got[u]["outcome"] for u in REASONS} == {
        u: "ready" if reason is None else "failed" for u, (_, reason) in REASONS.items()
    }


def test_a_negative_profiled_pool_is_a_fact_and_a_finding(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    s = StartupScript(unit="sglang-qwen.service", start="2026-02-11 06:44:50")
    s.started("2026-02-11 06:44:50")
    s.line(
        "[2026-02-11 06:45:01] max_total_tokens=20480 is larger than the profiled value -89624. "
        "Use the profiled value instead."
    )
    journal = _journal(tmp_path, [s])
    argv = ["scan", "--journal-dir", str(journal), "--state-dir", str(tmp_path / "s"), "--json"]
    code = main([*argv, "--unit", "sglang-qwen.service"])
    out, err = capsys.readouterr()
    assert code == 0, err
    (startup,) = json.loads(out)["startups"]
    assert startup["facts"]["profiled_max_total_tokens"] == -89624
    assert startup["outcome"] == "starting"  # judged before the start fails or limps on
    findings = {f["check"]: (f["severity"], f["current"]) for f in startup["findings"]}
    assert findings["kv_pool_negative"] == ("critical", -89624)
    assert set(findings) <= {"kv_pool_negative", "startup_stalled"}  # a 2026-02 start, still open


def test_a_restored_startup_with_a_generic_reason_still_takes_the_exception() -> None:
    """The reason's kind is not stored; a builder restored after a restart derives it again."""
    from sglang_sentinel.startups.tracker import _Builder

    head = "Scheduler hit an exception: Traceback (most recent call last):"
    for reason, kind in ((head, "generic"), ("Not enough memory", ""), (None, "")):
        b = _Builder(unit="u.service", invocation_id="ab" * 16, started_at=1.0)
        b.failure_reason = reason
        assert _Builder.from_json(b.to_json()).reason_kind == kind


def test_a_long_fact_or_reason_is_kept_in_its_head_and_redacted() -> None:
    """A 48 KiB reason (rule bait) is stored in its first FACT_CHARS / REASON_CHARS, redacted:
    it was redacted and stored whole (48 KiB in the record, 35 ms of one line's work)."""
    from sglang_sentinel.model import JournalEntry
    from sglang_sentinel.startups import StartupTracker
    from sglang_sentinel.startups.tracker import FACT_CHARS, REASON_CHARS

    secret = "hf_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7"
    filler = "padding " * 6144
    lines = [
        f"[2026-03-09 21:31:10 TP0] Custom allreduce is disabled because {secret} {filler}",
        f"[2026-03-09 21:31:11 TP0] Scheduler hit an exception: RuntimeError: {secret} {filler}",
    ]
    tracker = StartupTracker(MemoMatcher(load_rules([default_rules_dir()])))
    t0 = 1_000_000_000_000
    started = JournalEntry("x.service", "Started", t0, invocation_id="a" * 32)
    tracker.feed([started, *(line.encode() for line in lines)], lambda: t0 + 1)
    (record, _builder), *_ = tracker.take_dirty()
    reason = record.facts["custom_all_reduce_disabled_reason"]
    assert isinstance(reason, str) and len(reason) == FACT_CHARS
    assert reason.startswith("<redacted>") and "A1b2C3d4" not in reason
    assert record.failure_reason is not None and len(record.failure_reason) <= REASON_CHARS
    assert "A1b2C3d4" not in record.failure_reason
