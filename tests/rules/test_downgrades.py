"""The silent downgrades with most user impact are each caught: named by a rule, and kept by
the downgrade ledger.

The lines are SGLang's own log templates rendered with sample values, in the wording of each
release that has one: the `logger.*` calls of the released wheels sglang 0.5.9, 0.5.10 and
0.5.23 (https://pypi.org/project/sglang/; `python/sglang/srt/...` in
https://github.com/sgl-project/sglang), file:line beside each rule in
rules/60-downgrades.yaml.
"""

from __future__ import annotations

import pytest

from sglang_sentinel.rules import default_rules_dir, load_rules
from sglang_sentinel.startups import LogLedger, Vocabulary

PACK = load_rules([default_rules_dir()])
VOCABULARY = Vocabulary(PACK.downgrade_words)
PREFIX = "[2026-10-30 12:00:40 TP0] "

# The fifteen lines measured against the rule pack before the ledger (only the last matched).
MEASURED = (
    "CustomAllreduce is disabled because it's not supported on more than two PCIe-only GPUs. "
    "To silence this warning, specify disable_custom_all_reduce=True explicitly.",
    "Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs. "
    "To silence this warning, specify disable_custom_all_reduce=True explicitly.",
    "Qwen3ForCausalLM has no SGLang implementation, falling back to Transformers "
    "implementation. Some features may not be supported and performance may not be optimal.",
    "Disabling overlap schedule since mamba no_buffer is not compatible with overlap schedule, "
    "try to use --disable-radix-cache if overlap schedule is necessary",
    "Max running requests is reset to 48 for speculative decoding. You can override this by "
    "explicitly setting --max-running-requests.",
    "max_running_requests was reduced from the requested 74 to 26 (per dp worker) due to the "
    "available KV cache capacity.",
    "Post-capture KV sizing: max_running_requests 48 -> 40",
    "KV pool holds 30000 tokens, fewer than --context-length 131072. Long requests will be "
    "rejected.",
    "Using default W8A8 Block FP8 kernel config. Performance might be sub-optimal! Config file "
    "not found at /sgl/configs/N=2112,K=7168,device_name=NVIDIA_H20,dtype=fp8_w8a8,"
    "block_shape=[128, 128].json",
    "Full prefill CUDA graph is incompatible with two-batch overlap; disabling prefill CUDA graph.",
    "Disable prefill CUDA graph capture because no configured capture size fits "
    "backend=breakable with max_capture_tokens=8192 (sizes [16384])",
    "Disable prefill CUDA graph for EAGLE target on tc_piecewise to avoid FP4/MoE "
    "decode-replay corruption (#28386).",
    "Disable draft prefill CUDA graph because the draft model does not have a 'layers' attribute",
    "Prefill CUDA graph (breakable) is incompatible with --enable-kv-cache-sharding; disabling it.",
    "Cuda graph is disabled because of using torch native attention backend",
)
# The other wordings of the top fifteen by impact (research: the 15 with the most impact).
OTHER_WORDINGS = (
    "CustomAllReduceV2 is disabled because your platform lacks GPU P2P capability or P2P test "
    "failed. To silence this warning, specify disable_custom_all_reduce=True explicitly.",
    "Setup Custom allreduce failed with CUDA error: invalid device ordinal. To silence this "
    "warning, specify --disable-custom-all-reduce explicitly.",
    "Pipeline parallelism is incompatible with overlap schedule.",
    "The overlap scheduler and mixed chunked prefill are disabled because of using ngram "
    "speculative decoding.",
    "Overlap scheduler is disabled when using sparse head for embedding model.",
    "Post-capture KV sizing: decode CUDA graph max_bs=32 < max_running_requests=48; reserving "
    "activation headroom",
    "Breakable prefill CUDA graph is not enabled for this prefill CP configuration.",
    "Disable DFLASH draft cuda graph because the attention backend does not support it.",
    "Using default W8A8 Block INT8 kernel config. Performance might be sub-optimal! Config "
    "file not found at /x/N=4096,K=512,device_name=NVIDIA_A100,dtype=int8_w8a8,"
    "block_shape=[128, 128].json",
    "Your GPU does not have native support for FP8 computation but FP8 quantization is being "
    "used. Weight-only FP8 compression will be used leveraging the Marlin kernel. This may "
    "degrade performance for compute-heavy workloads.",
    "flashinfer.comm unified allreduce_fusion API is not available, falling back to standard "
    "implementation",
    "flashinfer.comm is not available, falling back to standard implementation",
    "Failed to initialize FlashInfer workspace: CUDA error: out of memory. Disabling "
    "flashinfer allreduce fusion permanently.",
    "FlashAttention3 only supports fp8_e4m3 if using FP8; Setting attention backend to triton.",
    "Attention backend not specified. Falling back to 'flashinfer' for deterministic "
    "inference. You can explicitly set --attention-backend to one of ['flashinfer', 'fa3'].",
    "Only Deepseek V3/R1 on NV-platform with capability >= 80 can use shared experts fusion "
    "optimization. Shared experts fusion optimization is disabled.",
    "Disabling Radix Cache for Gemma3ForConditionalGeneration as it is not yet supported.",
    "Disabling radix cache since trtllm_mha does not support page_size = 1, which will cause "
    "a very low cache hit rate.",
    "Radix cache is disabled for decode server",
    "DeepGemm is enabled but the scale_fmt of checkpoint is not ue8m0. This might cause "
    "accuracy degradation on Blackwell.",
    "Layer 'model.layers.0.mlp.gate' is not supported by AWQMarlin. Falling back to "
    "unoptimized AWQ kernels.",
    "Layer 'model.layers.0.mlp.experts' is not supported by AWQMoeMarlin. Falling back to Moe "
    "WNA16 kernels.",
    "There is no support for fast MoE kernel for current quantization method. Falling back to "
    "slow implementation.",
    "gguf quantization is not fully optimized yet. The speed can be slower than non-quantized "
    "models.",
    "Only use 24 SMs for DeepEP communication. This may result in highly suboptimal "
    "performance. Consider using --deepep-config to change the behavior.",
    "Mixed chunked prefill is disabled because of using eagle speculative decoding.",
    "Automatically turn off --chunked-prefill-size as it is not supported for qwen3_vl",
    "DP attention is enabled. The chunked prefill size is adjusted to 2048 to avoid MoE "
    "kernel issues.",
)
# 0.5.23's own wordings of the top fifteen where they differ from 0.5.10's: the 0.5.23 wheel's
# logger calls rendered with sample values (file:line in rules/60-downgrades.yaml).
WORDINGS_0523 = (
    "flashinfer.comm allreduce_fusion API is not available (No module named 'flashinfer.comm'), "
    "falling back to standard implementation",
    "Failed to initialize FlashInfer workspace (backend=trtllm): CUDA error: out of memory. "
    "Disabling flashinfer allreduce fusion permanently.",
    "Disable target prefill CUDA graph because the target model does not have a 'layers' attribute",
    "Mixed chunked prefill is disabled: EAGLE3 speculative decoding does not support it.",
    "Mixed chunked prefill is disabled for UNO speculative decoding.",
    "Mixed chunked prefill is disabled because of using Frozen-KV MTP speculative decoding.",
    "The mixed chunked prefill are disabled because of using ngram speculative decoding.",
    "DP attention is enabled. chunked prefill size is adjusted from 8192 to 2048.",
)


def test_fifteen_measured_lines_in_all() -> None:
    assert len(MEASURED) == 15


@pytest.mark.parametrize("body", MEASURED + OTHER_WORDINGS + WORDINGS_0523)
def test_each_downgrade_is_named_by_a_rule(body: str) -> None:
    matches = PACK.match(PREFIX + body)
    assert matches, body
    assert all(m.facts for m in matches)


@pytest.mark.parametrize("body", MEASURED + OTHER_WORDINGS + WORDINGS_0523)
def test_each_downgrade_is_kept_by_the_ledger(body: str) -> None:
    """A baseline that never printed it would get a new_downgrade_message."""
    assert VOCABULARY.hits((PREFIX + body).encode())
    ledger = LogLedger()
    assert ledger.offer(PREFIX + body)
    assert len(ledger.entries) == 1
