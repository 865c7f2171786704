"""The one registry of facts: every fact name, its type, scope, unit, sane range and where it shows.

A rule may only produce a fact declared here (`rules check` refuses any other name or another
type); the startup record carries every `startup` fact in this order, and the JSON contract, the
text report, the status page, the metrics collector and fact_ranges.py all read this table. The
fact table of docs/architecture.md is generated from it (`python -m sglang_sentinel.facts`,
`--check` in `make check`).

Imports nothing from the package, so any module (model.py included) may read it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, get_args

# The value types a rule file names (docs/architecture.md, "Rule files").
FactType = Literal["int", "float", "gb", "bool", "str", "list"]
# startup: stored in the startup record (None when not seen);
# runtime: the latest batch / retraction / OOM line after ready, about load, not the startup;
# control: steers the startup tracker (ready, failure) and is not stored as a fact.
Scope = Literal["startup", "runtime", "control"]
FACT_TYPES: Final[frozenset[str]] = frozenset(get_args(FactType))

GIB: Final = float(2**30)  # SGLang's "GB" is torch's bytes / 2**30; metrics export bytes

_GB: Final = (0.0, 1e6)  # up to 1 PB of GPU memory on one server
_GB_DELTA: Final = (-1e6, 1e6)  # a memory delta SGLang prints may be slightly negative
_COUNT: Final = (0.0, 1e12)
_SECONDS: Final = (0.0, 1e8)  # a little over three years
_LAYOUT: Final = (1.0, 1e6)  # tp_size, dp_size
_RATE: Final = (0.0, 1e12)


@dataclass(frozen=True, slots=True)
class Metric:
    """The gauge a fact is exported as (name without the sglang_sentinel_ prefix).

    `rank` orders the families on /metrics. A startup fact also has a `baseline_` series, whose
    help is "Baseline startup's value: " + help unless `baseline_help` says otherwise; runtime
    facts have none. `decode` metrics are built beside the decode families (daemon/decode_metrics.py).
    """

    name: str
    help: str
    rank: int
    baseline_help: str | None = None
    decode: bool = False

    @property
    def baseline_text(self) -> str:
        """The help of the baseline_ series."""
        return self.baseline_help or "Baseline startup's value: " + self.help


@dataclass(frozen=True, slots=True)
class Shown:
    """Where a person reads the fact: the report's facts line or the status page's key facts.

    `rank` orders the line or the table. Report: `core` facts are named as unseen on a ready
    startup that lacks them. Page: `check` is the finding that flags the row, `chart` draws it
    over the last startups.
    """

    label: str
    rank: int
    core: bool = False
    check: str | None = None
    chart: bool = False


@dataclass(frozen=True, slots=True)
class Fact:
    """One fact: what a rule yields under this name and everything downstream that shows it."""

    name: str
    type: FactType
    scope: Scope
    meaning: str  # what it is and which line says it (the docs table)
    unit: str = ""  # "GB" (GiB, as SGLang prints it), "s"; empty for counts, flags and text
    range: tuple[float, float] | None = None  # inclusive sane range of a numeric fact
    metric: Metric | None = None
    report: Shown | None = None
    page: Shown | None = None
    from_settings: bool = False  # taken from server_args when no line reported it
    derived: bool = False  # set by the startup tracker, never by a rule

    @property
    def scale(self) -> float:
        """Factor from the fact's value to its metric's base unit (GB -> bytes)."""
        return GIB if self.type == "gb" else 1.0


# In the JSON contract's (and the record's) order for startup facts.
FACTS: Final[tuple[Fact, ...]] = (
    Fact(
        "max_running_requests",
        "int",
        "startup",
        "effective max_running_requests, TP0 summary line",
        range=_COUNT,
        metric=Metric(
            "max_running_requests",
            "Effective max_running_requests from the TP0 summary line.",
            0,
        ),
        report=Shown("max_running_requests", 0, core=True),
        page=Shown("max_running_requests", 0, check="max_running_requests_drop", chart=True),
    ),
    Fact(
        "max_total_num_tokens",
        "int",
        "startup",
        "KV pool size in tokens, TP0 summary line",
        range=_COUNT,
        metric=Metric(
            "max_total_num_tokens", "KV pool size in tokens from the TP0 summary line.", 1
        ),
        report=Shown("max_total_num_tokens", 1, core=True),
        page=Shown("max_total_num_tokens", 2),
    ),
    Fact(
        "chunked_prefill_size",
        "int",
        "startup",
        "TP0 summary line (-1: chunked prefill off)",
        range=(-1.0, 1e12),
        metric=Metric("chunked_prefill_size_tokens", "Chunked prefill size.", 4),
        from_settings=True,
    ),
    Fact(
        "max_prefill_tokens",
        "int",
        "startup",
        "TP0 summary line",
        range=_COUNT,
    ),
    Fact(
        "context_len",
        "int",
        "startup",
        "model context length, TP0 summary line",
        range=_COUNT,
        metric=Metric("context_length_tokens", "Model context length in tokens.", 3),
    ),
    Fact(
        "available_gpu_mem_gb",
        "gb",
        "startup",
        "summary line's available_gpu_mem (after captures)",
        unit="GB",
        range=_GB,
        metric=Metric(
            "available_gpu_memory_bytes",
            "Free GPU memory after startup captures (summary line).",
            5,
        ),
    ),
    Fact(
        "available_cpu_mem_gb",
        "gb",
        "startup",
        "summary line's available_cpu_mem (CPU-only servers)",
        unit="GB",
        range=_GB,
    ),
    Fact(
        "load_avail_mem_gb",
        "gb",
        "startup",
        "free GPU memory at `Load weight begin`",
        unit="GB",
        range=_GB,
        metric=Metric(
            "load_available_gpu_memory_bytes", "Free GPU memory at 'Load weight begin'.", 6
        ),
        report=Shown("free_at_load_gb", 5, core=True),
        page=Shown("free GPU memory at load", 3, chart=True),
    ),
    Fact(
        "kv_cache_tokens",
        "int",
        "startup",
        "`KV Cache is allocated. #tokens:`",
        range=_COUNT,
        metric=Metric("kv_cache_tokens", "Tokens in the allocated KV cache.", 2),
        report=Shown("kv_tokens", 2, core=True),
        page=Shown("KV cache tokens", 1, check="kv_cache_tokens_drop", chart=True),
    ),
    Fact(
        "profiled_max_total_tokens",
        "int",
        "startup",
        "KV pool tokens the memory profile allowed, when `--max-total-tokens` asked for more "
        "(`max_total_tokens=N is larger than the profiled value P`); negative: no room for a pool",
        range=(-1e12, 1e12),
    ),
    Fact(
        "kv_cache_gb",
        "gb",
        "startup",
        "K+V size (or KV size for MLA)",
        unit="GB",
        range=_GB,
    ),
    Fact("mamba_cache_size", "int", "startup", "`max_mamba_cache_size:`", range=_COUNT),
    Fact(
        "memory_pool_avail_gb",
        "gb",
        "startup",
        "`Memory pool end. avail mem=`",
        unit="GB",
        range=_GB,
    ),
    Fact(
        "cuda_graph",
        "bool",
        "startup",
        "decode CUDA graph captured (true) / disabled (false)",
        metric=Metric("cuda_graph_enabled", "1 if decode CUDA graphs were captured.", 8),
        report=Shown("cuda_graph", 3, core=True),
        page=Shown("CUDA graph", 4, check="cuda_graph_disabled"),
        from_settings=True,
    ),
    Fact(
        "cuda_graph_disabled_reason",
        "str",
        "startup",
        'why decode CUDA graph is off ("because of …")',
    ),
    Fact(
        "cuda_graph_mem_gb",
        "gb",
        "startup",
        "capture end `mem usage=`",
        unit="GB",
        range=_GB_DELTA,
    ),
    Fact(
        "piecewise_cuda_graph",
        "bool",
        "startup",
        "PCG (<=0.5.10) or prefill CUDA graph (0.5.23) captured / disabled",
        metric=Metric(
            "piecewise_cuda_graph_enabled",
            "1 if piecewise (prefill) CUDA graphs were captured.",
            9,
        ),
        report=Shown("piecewise_cuda_graph", 4, core=True),
        page=Shown("piecewise CUDA graph", 5, check="piecewise_cuda_graph_disabled"),
        from_settings=True,
    ),
    Fact(
        "piecewise_cuda_graph_disabled_reason",
        "str",
        "startup",
        'the text after "because"/"due to"',
    ),
    Fact(
        "moe_config_missing",
        "list",
        "startup",
        "distinct missing Triton MoE config file names (basename)",
        metric=Metric(
            "moe_configs_missing",
            "Distinct Triton MoE kernel config files missing (untuned kernels).",
            10,
        ),
        report=Shown("moe_configs_missing", 6),
        page=Shown("MoE configs missing", 6, check="moe_config_missing"),
    ),
    Fact(
        "moe_config_fallback",
        "list",
        "startup",
        "distinct config files that fell back to another Triton version",
    ),
    Fact(
        "weight_load_seconds",
        "float",
        "startup",
        "`Load weight end`",
        unit="s",
        range=_SECONDS,
        metric=Metric("weight_load_duration_seconds", "Weight loading time.", 11),
        page=Shown("weight load", 7),
    ),
    Fact(
        "weight_mem_gb",
        "gb",
        "startup",
        "`Load weight end` mem usage",
        unit="GB",
        range=_GB_DELTA,
        metric=Metric("weight_memory_bytes", "GPU memory taken by the weights.", 7),
    ),
    Fact(
        "startup_seconds",
        "float",
        "startup",
        "start to ready by the journal's monotonic clock",
        unit="s",
        range=_SECONDS,
        metric=Metric("startup_duration_seconds", "From service start to ready.", 12),
        page=Shown("time to ready", 8, chart=True),
        derived=True,
    ),
    Fact("tp_size", "int", "startup", "tensor parallel size", range=_LAYOUT, from_settings=True),
    Fact("dp_size", "int", "startup", "data parallel size", range=_LAYOUT, from_settings=True),
    Fact("model_path", "str", "startup", "the served model", from_settings=True),
    Fact("model_arch", "str", "startup", "the model's architecture"),
    Fact("attention_backend", "str", "startup", "attention backend", from_settings=True),
    Fact("kv_cache_dtype", "str", "startup", "KV cache dtype"),
    Fact(
        "cuda_graph_max_bs",
        "int",
        "startup",
        "largest batch of `Capture cuda graph bs [...]` (0.5.23: capture end `bs=[...]`)",
        range=_COUNT,
        metric=Metric(
            "cuda_graph_max_batch_size",
            "Largest batch size the decode CUDA graph was captured for.",
            13,
            baseline_help="Baseline startup's largest captured CUDA-graph batch size.",
            decode=True,
        ),
    ),
    Fact(
        "mamba_running_cap",
        "int",
        "startup",
        "`max_running_requests is capped to N by the mamba state cache (...)`",
        range=_COUNT,
    ),
    Fact("mamba_running_cap_reason", "str", "startup", "the cap line's reason"),
    # Silent downgrades (rules/60-downgrades.yaml): what SGLang turned off or fell back from.
    Fact(
        "transformers_fallback",
        "str",
        "startup",
        "model class with no SGLang implementation, run by the Transformers fallback",
    ),
    Fact("custom_all_reduce", "bool", "startup", "custom all-reduce off (false): NCCL instead"),
    Fact("custom_all_reduce_disabled_reason", "str", "startup", "why custom all-reduce is off"),
    Fact(
        "overlap_schedule",
        "bool",
        "startup",
        "overlap scheduler off (false): a line, else the resolved `disable_overlap_schedule`",
        from_settings=True,
    ),
    Fact("overlap_schedule_disabled_reason", "str", "startup", "why the overlap scheduler is off"),
    Fact(
        "max_running_requests_limit",
        "str",
        "startup",
        "the limit SGLang says set max_running_requests (speculative reset, KV cache, ...)",
    ),
    Fact(
        "max_running_requests_limited_to",
        "int",
        "startup",
        "the value that limit set (per DP worker where SGLang says so)",
        range=_COUNT,
    ),
    Fact(
        "kv_pool_below_context_tokens",
        "int",
        "startup",
        "`KV pool holds N tokens, fewer than --context-length` (0.5.23)",
        range=_COUNT,
    ),
    Fact("draft_cuda_graph", "bool", "startup", "a draft model's CUDA graph turned off (false)"),
    Fact("draft_cuda_graph_disabled_reason", "str", "startup", "why the draft graph is off"),
    Fact(
        "block_gemm_config_missing",
        "list",
        "startup",
        "distinct missing W8A8 block FP8/INT8 GEMM config file names (basename)",
    ),
    Fact("fp8_marlin_fallback", "bool", "startup", "FP8 weight-only through the Marlin kernel"),
    Fact(
        "flashinfer_allreduce_fusion",
        "bool",
        "startup",
        "FlashInfer all-reduce fusion unavailable or disabled (false)",
    ),
    Fact(
        "flashinfer_allreduce_fusion_disabled_reason",
        "str",
        "startup",
        "why FlashInfer all-reduce fusion is off",
    ),
    Fact("attention_backend_fallback", "str", "startup", "backend SGLang fell back to"),
    Fact("shared_experts_fusion", "bool", "startup", "shared experts fusion disabled (false)"),
    Fact(
        "shared_experts_fusion_disabled_reason",
        "str",
        "startup",
        "why shared experts fusion is off",
    ),
    Fact("radix_cache", "bool", "startup", "radix (prefix) cache turned off (false) by SGLang"),
    Fact("radix_cache_disabled_reason", "str", "startup", "why the radix cache is off"),
    Fact(
        "deep_gemm_scale_fmt_mismatch",
        "bool",
        "startup",
        "DeepGEMM on with a checkpoint scale_fmt that is not ue8m0 (accuracy on Blackwell)",
    ),
    Fact("deep_gemm_precompile", "bool", "startup", "a DeepGEMM JIT pre-compile session ran"),
    Fact(
        "quant_kernel_fallback",
        "list",
        "startup",
        "quantized kernels that fell back to slower ones (AWQMarlin, AWQMoeMarlin, GGUF MoE)",
    ),
    Fact(
        "quantization_not_optimized",
        "str",
        "startup",
        "`X quantization is not fully optimized yet`",
    ),
    Fact("deepep_num_sms", "int", "startup", "SMs DeepEP communication uses", range=_COUNT),
    Fact(
        "features_switched_off",
        "list",
        "startup",
        "features SGLang switched off or adjusted against the flags (mixed chunked prefill, ...)",
    ),
    # runtime: the latest batch / retraction / OOM line
    Fact(
        "gen_throughput",
        "float",
        "runtime",
        "decode batch line's gen throughput (token/s)",
        unit="tokens/s",
        range=_RATE,
        metric=Metric(
            "generation_throughput_tokens_per_second",
            "Generation throughput from the latest decode batch line.",
            20,
        ),
    ),
    Fact(
        "input_throughput",
        "float",
        "runtime",
        "prefill batch line's input throughput (token/s)",
        unit="tokens/s",
        range=_RATE,
    ),
    Fact(
        "running_requests",
        "int",
        "runtime",
        "batch line's #running-req",
        range=_COUNT,
        metric=Metric("running_requests", "Running requests in the latest batch line.", 21),
    ),
    Fact(
        "queued_requests",
        "int",
        "runtime",
        "batch line's #queue-req",
        range=_COUNT,
        metric=Metric("queued_requests", "Queued requests in the latest batch line.", 22),
    ),
    Fact(
        "token_usage",
        "float",
        "runtime",
        "batch line's token usage (0-1)",
        range=(0.0, 1e6),
        metric=Metric("token_usage_ratio", "KV token usage (0-1) in the latest batch line.", 23),
    ),
    Fact("retracted_requests", "int", "runtime", "KV pool retraction line", range=_COUNT),
    Fact("out_of_memory", "str", "runtime", "an out-of-memory line after ready"),
    # control: steer the tracker
    Fact(
        "server_args_repr",
        "str",
        "control",
        "the text after `server_args=`; parsed by serverargs/parse.py into the record's server_args",
    ),
    Fact("ready", "bool", "control", 'the server reported ready ("fired up and ready to roll")'),
    Fact(
        "failure_reason",
        "str",
        "control",
        "a fatal startup error; before ready it makes the startup `failed`",
    ),
    Fact(
        "failure_exception",
        "str",
        "control",
        "the exception a traceback ends with; replaces a failure_reason that names no error",
    ),
    Fact(
        "traceback_chained",
        "bool",
        "control",
        "a chained traceback goes on (`During handling of the above exception, ...`, `The above "
        "exception was the direct cause ...`): the next exception is the one the start died of",
    ),
)

BY_NAME: Final[Mapping[str, Fact]] = {f.name: f for f in FACTS}
# The facts every startup record carries (None when not seen), in report order.
STARTUP_FACTS: Final = tuple(f.name for f in FACTS if f.scope == "startup")
RUNTIME_FACTS: Final = frozenset(f.name for f in FACTS if f.scope == "runtime")
CONTROL_FACTS: Final = frozenset(f.name for f in FACTS if f.scope == "control")
# Every fact name a rule may produce; `rules check` rejects any other.
KNOWN_FACTS: Final = frozenset(BY_NAME)
FROM_SETTINGS: Final = tuple(f.name for f in FACTS if f.from_settings)
RANGES: Final[Mapping[str, tuple[float, float]]] = {
    f.name: f.range for f in FACTS if f.range is not None
}


def metric_of(name: str) -> Metric:
    """The metric of fact `name`; a KeyError names a fact that has none."""
    metric = BY_NAME[name].metric
    if metric is None:
        raise KeyError(f"fact {name} has no metric")
    return metric


def metric_facts(scope: Scope) -> tuple[Fact, ...]:
    """The facts of `scope` the collector exports itself, in /metrics order."""
    return tuple(
        sorted(
            (f for f in FACTS if f.scope == scope and f.metric and not f.metric.decode),
            key=lambda f: f.metric.rank if f.metric else 0,
        )
    )


def report_facts() -> tuple[Fact, ...]:
    """The facts of the text report's facts line, in its order."""
    return tuple(
        sorted((f for f in FACTS if f.report), key=lambda f: f.report.rank if f.report else 0)
    )


def page_facts() -> tuple[Fact, ...]:
    """The status page's key facts, in its order."""
    return tuple(sorted((f for f in FACTS if f.page), key=lambda f: f.page.rank if f.page else 0))


# -- the docs table -------------------------------------------------------------------------------

DOC_PATH = Path("docs/architecture.md")
_BEGIN = "<!-- facts table: generated from sglang_sentinel/facts.py by `make facts-doc` -->"
_END = "<!-- end of facts table -->"


def markdown_table() -> str:
    """The registry as the docs table (between its markers, markers included)."""
    rows = [
        _BEGIN,
        "| fact | type | scope | unit | metric | shown in | meaning |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in FACTS:
        metric = f"`sglang_sentinel_{f.metric.name}`" if f.metric else ""
        shown = ", ".join(
            where for where, spec in (("report", f.report), ("page", f.page)) if spec is not None
        )
        meaning = f.meaning
        if f.from_settings:
            meaning += "; else from server_args"
        if f.derived:
            meaning += " (set by the tracker)"
        rows.append(
            f"| `{f.name}` | {f.type} | {f.scope} | {f.unit} | {metric} | {shown} | {meaning} |"
        )
    rows.append(_END)
    return "\n".join(rows)


def with_table(doc: str) -> str:
    """`doc` with its generated facts table replaced by the registry's."""
    head, begin, rest = doc.partition(_BEGIN)
    _, end, tail = rest.partition(_END)
    if not begin or not end:
        raise ValueError(f"the facts table markers are missing: {_BEGIN!r} ... {_END!r}")
    return head + markdown_table() + tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sglang_sentinel.facts",
        description="Write the facts table of docs/architecture.md from the registry.",
    )
    parser.add_argument("--check", action="store_true", help="fail if the table is out of date")
    parser.add_argument("path", nargs="?", type=Path, default=DOC_PATH)
    args = parser.parse_args(argv)
    doc = args.path.read_text(encoding="utf-8")
    new = with_table(doc)
    if args.check:
        if new != doc:
            print(
                f"{args.path}: the facts table differs from sglang_sentinel/facts.py; "
                "run `make facts-doc`",
                file=sys.stderr,
            )
            return 1
        return 0
    if new != doc:
        args.path.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
