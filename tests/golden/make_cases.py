"""Writes the journal exports of the synthetic golden cases (deterministic: fixed ids and times),
and the baseline file a case pins before its scan (`baseline.json`, as `sentinel baseline
--export` writes it, from a startup of another host's journal).

Run from the repository root after changing a case: `.venv/bin/python tests/golden/make_cases.py`,
then `.venv/bin/pytest tests/golden/test_golden.py --update-golden` and review the diff.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "support"))
sys.path.insert(0, str(HERE.parent.parent))

from journaltools import StartupScript, build_journal, write_export  # noqa: E402

from sglang_sentinel.cli import main as sentinel  # noqa: E402

CMD = "/opt/sglang/.venv/bin/python3 -m sglang.launch_server --model-path /models/Qwen3-30B --tp-size 2"


def _script(
    n: int, start: str, cmdline: str = CMD, unit: str = "sglang-qwen.service"
) -> StartupScript:
    return StartupScript(
        unit=unit,
        cmdline=cmdline,
        start=start,
        invocation_id=f"{n:02d}" * 16,
        stream_id=f"{n + 50:02d}" * 16,
        pid=41000 + n,
    )


def _v0523(
    script: StartupScript, day: str, *, mrr: int, kv: int, prefill: str, flag: str | None = None
) -> StartupScript:
    """A 0.5.23 startup; `flag` is the raw `cuda_graph_backend_prefill` (None unless given)."""
    script.started(f"{day} 10:00:00")
    script.line(
        f"[{day} 10:00:01] server_args={{'model_path': '/models/Qwen3-30B', "
        "'served_model_name': 'qwen3', 'tp_size': 2, 'dp_size': 1, 'attention_backend': 'fa3', "
        "'api_key': 'sk-golden-not-a-real-key', 'chunked_prefill_size': 8192, "
        "'cuda_graph_config': {'decode': {'backend': 'full'}, "
        f"'prefill': {{'backend': '{prefill}'}}}}, 'cuda_graph_backend_prefill': {flag!r}}}"
    )
    for tp in (0, 1):
        script.line(f"[{day} 10:00:05 TP{tp}] Load weight begin. avail mem=78.50 GB")
        script.line(
            f"[{day} 10:00:30 TP{tp}] Load weight end. elapsed=25.10 s, "
            "type=Qwen3MoeForCausalLM, avail mem=48.00 GB, mem usage=30.50 GB."
        )
        script.line(
            f"[{day} 10:00:31 TP{tp}] KV Cache is allocated. dtype: torch.bfloat16, "
            f"#tokens: {kv}, K size: 10.00 GB, V size: 10.00 GB"
        )
        if prefill == "disabled":
            script.line(
                f"[{day} 10:00:32 TP{tp}] Disable prefill CUDA graph because cuda_graph_config "
                "resolved prefill.backend='disabled' (e.g. via --cuda-graph-backend-prefill=disabled "
                "or auto-disable rules)."
            )
        else:
            script.line(
                f"[{day} 10:00:32 TP{tp}] Capture target prefill CUDA graph begin. "
                f"backend={prefill}, num_tokens=[8, 16], avail mem=26.90 GB"
            )
        script.line(
            f"[{day} 10:00:40 TP{tp}] Capture target decode CUDA graph begin. backend=full, "
            "num_tokens_per_req=1, avail mem=26.00 GB"
        )
    script.line(
        f"[{day} 10:00:50 TP0] max_total_num_tokens={kv}, chunked_prefill_size=8192, "
        f"max_prefill_tokens=16384, max_running_requests={mrr}, context_len=40960, "
        "available_gpu_mem=20.00 GB"
    )
    script.line(f"[{day} 10:00:55] The server is fired up and ready to roll!")
    return script


def sglang_0523_prefill_off() -> list[StartupScript]:
    """0.5.23 dict-repr server_args; the second start loses the prefill graph and capacity."""
    a = _v0523(
        _script(1, "2026-10-30 10:00:00"), "2026-10-30", mrr=64, kv=400000, prefill="breakable"
    )
    b = _v0523(
        _script(2, "2026-10-31 10:00:00"), "2026-10-31", mrr=40, kv=250000, prefill="disabled"
    )
    return [a, b]


def sglang_0523_prefill_flag() -> list[StartupScript]:
    """As prefill-off, but the second start asked for it: `--cuda-graph-backend-prefill disabled`.

    The finding and the evidence for the resolved `cuda_graph_config.prefill.backend` must both
    name the flag (they once disagreed: the evidence said "set by SGLang")."""
    a = _v0523(
        _script(7, "2026-11-01 10:00:00"), "2026-11-01", mrr=64, kv=400000, prefill="breakable"
    )
    b = _v0523(
        _script(8, "2026-11-02 10:00:00", CMD + " --cuda-graph-backend-prefill disabled"),
        "2026-11-02",
        mrr=64,
        kv=400000,
        prefill="disabled",
        flag="disabled",
    )
    return [a, b]


def crash_loop() -> list[StartupScript]:
    """A ready start, then three starts that die before ready (PID 1's status and SGLang's reason)."""
    scripts = [
        _v0523(
            _script(3, "2026-03-10 09:00:00"), "2026-03-10", mrr=64, kv=400000, prefill="breakable"
        )
    ]
    for i in range(3):
        s = _script(4 + i, f"2026-03-11 10:0{i}:00")
        s.started(f"2026-03-11 10:0{i}:00")
        s.line(f"[2026-03-11 10:0{i}:05 TP0] Load weight begin. avail mem=20.00 GB")
        s.line(
            f"[2026-03-11 10:0{i}:20 TP0] Scheduler hit an exception: Traceback (most recent call last):"
        )
        s.line(
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            "Current value: mem_fraction_static=0.93",
            when=f"2026-03-11 10:0{i}:20",
        )
        s.process_exited(1, when=f"2026-03-11 10:0{i}:21")
        s.failed("exit-code", when=f"2026-03-11 10:0{i}:21")
        scripts.append(s)
    return scripts


def pinned_baseline() -> list[StartupScript]:
    """Two starts short of capacity, the second like the first, on a host whose pinned baseline
    (baseline.json, imported before the scan) came from a good start elsewhere. Against the
    previous ready startup the second has nothing to say; against the pin both are down."""
    return [
        _v0523(
            _script(10, "2026-11-04 10:00:00"), "2026-11-04", mrr=40, kv=250000, prefill="breakable"
        ),
        _v0523(
            _script(11, "2026-11-05 10:00:00"), "2026-11-05", mrr=40, kv=250000, prefill="breakable"
        ),
    ]


def pinned_baseline_source() -> list[StartupScript]:
    """The good start on the other host that pinned-baseline's baseline.json was exported from."""
    return [
        _v0523(
            _script(9, "2026-11-03 10:00:00"), "2026-11-03", mrr=64, kv=400000, prefill="breakable"
        )
    ]


# The fifteen silent downgrades with most user impact (downgrades-research §1.3), each in the
# wording of SGLang 0.5.9, 0.5.10 and 0.5.23: the released wheels' `logger.*` calls rendered with
# sample values (https://pypi.org/project/sglang/; file:line beside each rule in
# rules/pack/60-downgrades.yaml). One tuple per item; 0.5.23's overlap-off is silent (the resolved
# `disable_overlap_schedule` in server_args says it).
_FP8_GEMM = (
    "Using default W8A8 Block FP8 kernel config. Performance might be sub-optimal! Config file "
    "not found at /opt/sglang/configs/N=2112,K=7168,device_name=NVIDIA_H20,dtype=fp8_w8a8,"
    "block_shape=[128, 128].json"
)
_MARLIN = (
    "Your GPU does not have native support for FP8 computation but FP8 quantization is being "
    "used. Weight-only FP8 compression will be used leveraging the Marlin kernel. This may "
    "degrade performance for compute-heavy workloads."
)
_SHARED = (
    "Only Deepseek V3/R1 on NV-platform with capability >= 80 can use shared experts fusion "
    "optimization. Shared experts fusion optimization is disabled."
)
_COMMON = {
    "transformers": "Qwen3ForCausalLM has no SGLang implementation, falling back to Transformers "
    "implementation. Some features may not be supported and performance may not be optimal.",
    "fa3": "FlashAttention3 only supports fp8_e4m3 if using FP8; Setting attention backend to "
    "triton.",
    "radix": "Disabling Radix Cache for Gemma3ForConditionalGeneration as it is not yet supported.",
    "deepgemm": "DeepGemm is enabled but the scale_fmt of checkpoint is not ue8m0. This might "
    "cause accuracy degradation on Blackwell.",
    "awq": "Layer 'model.layers.0.mlp.gate' is not supported by AWQMarlin. Falling back to "
    "unoptimized AWQ kernels.",
    "deepep": "Only use 24 SMs for DeepEP communication. This may result in highly suboptimal "
    "performance. Consider using --deepep-config to change the behavior.",
}
_PCIE = (
    " is disabled because it's not supported on more than two PCIe-only GPUs. To silence this "
    "warning, specify disable_custom_all_reduce=True explicitly."
)
_OVERLAP = (
    "Disabling overlap schedule since mamba no_buffer is not compatible with overlap schedule, "
    "try to use --disable-radix-cache if overlap schedule is necessary"
)
_MRR_RESET = (
    "Max running requests is reset to 48 for speculative decoding. You can override this by "
    "explicitly setting --max-running-requests."
)
FIFTEEN: dict[str, tuple[str, ...]] = {
    "0.5.9": (
        _COMMON["transformers"],
        "Custom allreduce" + _PCIE,
        _OVERLAP,
        _MRR_RESET,
        "Cuda graph is disabled because of using torch native attention backend",
        _FP8_GEMM,
        _MARLIN,
        "flashinfer.comm is not available, falling back to standard implementation",
        _COMMON["fa3"],
        _SHARED,
        _COMMON["radix"],
        _COMMON["deepgemm"],
        _COMMON["awq"],
        _COMMON["deepep"],
        "Mixed chunked prefill is disabled because of using eagle speculative decoding.",
    ),
    "0.5.10": (
        _COMMON["transformers"],
        "CustomAllreduce" + _PCIE,
        _OVERLAP,
        _MRR_RESET,
        "Cuda graph is disabled because of using torch native attention backend",
        _FP8_GEMM,
        _MARLIN,
        "flashinfer.comm unified allreduce_fusion API is not available, falling back to "
        "standard implementation",
        _COMMON["fa3"],
        _SHARED,
        _COMMON["radix"],
        _COMMON["deepgemm"],
        _COMMON["awq"],
        _COMMON["deepep"],
        "Mixed chunked prefill is disabled because of using eagle speculative decoding.",
    ),
    "0.5.23": (
        _COMMON["transformers"],
        "CustomAllreduce" + _PCIE,
        "max_running_requests was reduced from the requested 74 to 48 (per dp worker) due to "
        "the available KV cache capacity.",
        "Full prefill CUDA graph is incompatible with two-batch overlap; disabling prefill CUDA "
        "graph.",
        "Disable target prefill CUDA graph because the target model does not have a 'layers' "
        "attribute",
        _FP8_GEMM,
        _MARLIN,
        "flashinfer.comm allreduce_fusion API is not available (No module named "
        "'flashinfer.comm'), falling back to standard implementation",
        _COMMON["fa3"],
        _SHARED,
        "Radix cache is disabled for decode server",
        _COMMON["deepgemm"],
        _COMMON["awq"],
        _COMMON["deepep"],
        "Mixed chunked prefill is disabled: EAGLE3 speculative decoding does not support it.",
    ),
}
_SERVER_ARGS = {
    "0.5.9": "server_args=ServerArgs(model_path='/models/Qwen3-30B', tp_size=2, "
    "enable_piecewise_cuda_graph=False, disable_overlap_schedule={overlap})",
    "0.5.10": "server_args=ServerArgs(model_path='/models/Qwen3-30B', tp_size=2, "
    "disable_piecewise_cuda_graph=False, enforce_piecewise_cuda_graph=False, "
    "disable_overlap_schedule={overlap})",
    "0.5.23": "server_args={{'model_path': '/models/Qwen3-30B', 'tp_size': 2, "
    "'cuda_graph_config': {{'decode': {{'backend': 'full'}}, 'prefill': {{'backend': "
    "'breakable'}}}}, 'disable_overlap_schedule': {overlap}}}",
}


def _versioned(n: int, day: str, version: str, downgraded: bool) -> StartupScript:
    """A startup of one configuration in `version`'s templates; `downgraded`: it also prints
    the fifteen in that version's wording (0.5.23's overlap-off only in server_args)."""
    script = _script(n, f"{day} 10:00:00")
    script.started(f"{day} 10:00:00")
    script.line(
        f"[{day} 10:00:01] Attention backend not specified. Use flashinfer backend by default."
    )
    overlap = downgraded and version == "0.5.23"
    script.line(f"[{day} 10:00:02] " + _SERVER_ARGS[version].format(overlap=overlap))
    for tp in (0, 1):
        script.line(f"[{day} 10:00:05 TP{tp}] Load weight begin. avail mem=78.50 GB")
        dtype = "dtype=torch.bfloat16, " if version == "0.5.9" else ""
        script.line(
            f"[{day} 10:00:30 TP{tp}] Load weight end. elapsed=25.1{tp} s, "
            f"type=Qwen3MoeForCausalLM, {dtype}avail mem=48.00 GB, mem usage=30.50 GB."
        )
        script.line(
            f"[{day} 10:00:31 TP{tp}] KV Cache is allocated. #tokens: 400000, K size: 10.00 GB, "
            "V size: 10.00 GB"
        )
        if downgraded:
            for body in FIFTEEN[version]:
                script.line(f"[{day} 10:00:32 TP{tp}] {body}")
    script.line(
        f"[{day} 10:00:50 TP0] max_total_num_tokens=400000, chunked_prefill_size=8192, "
        "max_prefill_tokens=16384, max_running_requests=48, context_len=40960, "
        "available_gpu_mem=20.00 GB"
    )
    script.line(f"[{day} 10:00:55] The server is fired up and ready to roll!")
    return script


def downgrades_by_version() -> list[StartupScript]:
    """Per release, a clean startup, then one that prints the fifteen in its wording: each is
    compared with the clean one before it, so its new_downgrade_message lists the fifteen (the
    rule-named ones judged by their own findings); the clean startup of the next release after
    it has them gone (information) and says the version changed."""
    scripts = []
    for i, version in enumerate(("0.5.9", "0.5.10", "0.5.23")):
        for downgraded in (False, True):
            n = 20 + 2 * i + downgraded
            scripts.append(_versioned(n, f"2026-11-1{n - 20}", version, downgraded))
    return scripts


CASES: dict[str, Callable[[], list[StartupScript]]] = {
    "sglang-0523-prefill-off": sglang_0523_prefill_off,
    "sglang-0523-prefill-flag": sglang_0523_prefill_flag,
    "crash-loop": crash_loop,
    "pinned-baseline": pinned_baseline,
    "downgrades-by-version": downgrades_by_version,
}


# Cases whose scan starts from a pinned baseline: the case -> the startups it is exported from.
BASELINES: dict[str, Callable[[], list[StartupScript]]] = {
    "pinned-baseline": pinned_baseline_source,
}


def write_baseline(name: str, build: Callable[[], list[StartupScript]]) -> Path:
    """`sentinel baseline --export` of the last ready startup of `build`'s journal."""
    out = HERE / name / "baseline.json"
    with tempfile.TemporaryDirectory() as tmp:
        export = Path(tmp) / "source.export"
        write_export([e for script in build() for e in script.entries()], export)
        journal = build_journal(export, Path(tmp) / "journal", "source")
        state = ["--state-dir", str(Path(tmp) / "state"), "--unit", "sglang-qwen.service"]
        for argv in (
            ["scan", "--journal-dir", str(journal), *state],
            ["baseline", *state, "--pin", "latest"],
            ["baseline", *state, "--export", str(out)],
        ):
            if sentinel(argv) != 0:
                raise SystemExit(f"sentinel {' '.join(argv)} failed")
    return out


def main() -> None:
    for name, build in CASES.items():
        entries = [e for script in build() for e in script.entries()]
        (HERE / name).mkdir(exist_ok=True)
        write_export(entries, HERE / name / "journal.export")
        print(f"wrote {HERE / name / 'journal.export'} ({len(entries)} entries)")
    for name, build in BASELINES.items():
        print(f"wrote {write_baseline(name, build)}")


if __name__ == "__main__":
    main()
