"""Tests for serverargs.py: both repr forms, truncation, redaction at parse time, and diffs."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglang_sentinel.redact import REDACTED
from sglang_sentinel.serverargs import diff_server_args, normalized_settings, parse_server_args
from sglang_sentinel.serverargs.diff import RENAMES, FieldChange, canonical_field
from sglang_sentinel.serverargs.parse import ServerArgsResult, is_complete

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "seed-flag-change"
SECRET = "sk-EXAMPLE-not-a-real-key"

# A 0.5.23-style line: a dict repr with the resolved CUDA-graph settings nested.
DICT_REPR_0523 = (
    "{'model_path': '/models/Qwen3.5-122B-A10B', 'tp_size': 4, 'dp_size': 1, 'ep_size': 1, "
    "'pp_size': 1, 'mem_fraction_static': 0.75, 'max_running_requests': None, "
    f"'api_key': '{SECRET}', 'served_model_name': 'qwen3.5-122b-a10b', "
    "'attention_backend': 'flashinfer', 'chunked_prefill_size': 8192, "
    "'cuda_graph_backend_prefill': None, 'cuda_graph_backend_decode': None, "
    "'cuda_graph_config': {'prefill': {'backend': 'disabled', 'max_bs': 256, "
    "'bs': [1, 2, 4]}, 'decode': {'backend': 'full', 'max_bs': 512}}, "
    "'cuda_graph_max_bs_decode': 512, 'flashinfer_allreduce_fusion_backend': 'auto', "
    "'enable_fused_moe_sum_all_reduce': True, 'moe_runner_backend': 'auto', "
    "'kv_cache_dtype': 'auto', 'enable_multimodal': None, 'random_seed': 5}"
)


def fixture_repr(name: str) -> str:
    text = (FIXTURES / name).read_text()
    line = next(line for line in text.splitlines() if "server_args=" in line)
    return line.split("server_args=", 1)[1]


@pytest.fixture(scope="module")
def startup1() -> ServerArgsResult:
    return parse_server_args(fixture_repr("startup-1-baseline.log"))


@pytest.fixture(scope="module")
def startup2() -> ServerArgsResult:
    return parse_server_args(fixture_repr("startup-2-flags-added.log"))


def test_fixture_1_parses_completely(startup1: ServerArgsResult) -> None:
    assert startup1.complete
    assert startup1.error is None
    args = startup1.args
    assert len(args) == 328  # the 0.5.9 field count
    assert args["tp_size"] == 4
    assert args["model_path"] == "/models/Qwen3.5-122B-A10B"
    assert args["enable_piecewise_cuda_graph"] is True
    assert "disable_piecewise_cuda_graph" not in args
    assert args["mem_fraction_static"] == 0.75
    assert args["api_key"] == REDACTED
    assert args["admin_api_key"] is None
    assert args["random_seed"] == 834561237
    assert args["model_loader_extra_config"] == "{}"
    assert args["mm_process_config"] == {}
    assert args["uvicorn_access_log_exclude_prefixes"] == []
    assert args["cuda_graph_bs"][:5] == [1, 2, 4, 8, 12]
    assert args["cuda_graph_bs"][-1] == 512
    assert args["gc_warning_threshold_secs"] == 0.0
    assert SECRET not in repr(startup1)


def test_fixture_2_parses_completely(startup2: ServerArgsResult) -> None:
    assert startup2.complete
    assert startup2.error is None
    args = startup2.args
    assert len(args) == 348
    assert args["tp_size"] == 4
    assert args["model_path"] == "/models/Qwen3.5-122B-A10B"
    assert args["disable_piecewise_cuda_graph"] is True
    assert "enable_piecewise_cuda_graph" not in args
    assert args["enable_fused_moe_sum_all_reduce"] is True
    assert args["enable_flashinfer_allreduce_fusion"] is True
    assert args["mem_fraction_static"] == 0.75
    assert args["api_key"] == REDACTED
    assert args["ssl_keyfile_password"] is None
    assert SECRET not in repr(startup2)


def test_dict_repr_0523_with_nested_config() -> None:
    result = parse_server_args(DICT_REPR_0523)
    assert result == ServerArgsResult(
        args={
            "model_path": "/models/Qwen3.5-122B-A10B",
            "tp_size": 4,
            "dp_size": 1,
            "ep_size": 1,
            "pp_size": 1,
            "mem_fraction_static": 0.75,
            "max_running_requests": None,
            "api_key": REDACTED,
            "served_model_name": "qwen3.5-122b-a10b",
            "attention_backend": "flashinfer",
            "chunked_prefill_size": 8192,
            "cuda_graph_backend_prefill": None,
            "cuda_graph_backend_decode": None,
            "cuda_graph_config": {
                "prefill": {"backend": "disabled", "max_bs": 256, "bs": [1, 2, 4]},
                "decode": {"backend": "full", "max_bs": 512},
            },
            "cuda_graph_max_bs_decode": 512,
            "flashinfer_allreduce_fusion_backend": "auto",
            "enable_fused_moe_sum_all_reduce": True,
            "moe_runner_backend": "auto",
            "kv_cache_dtype": "auto",
            "enable_multimodal": None,
            "random_seed": 5,
        },
        complete=True,
        error=None,
    )


def test_value_forms() -> None:
    text = (
        "ServerArgs(lora_paths=[LoRARef(lora_id='1f', lora_name='a', lora_path='/p', "
        "pinned=None)], hook=<function my_hook at 0x7f3a2b1c>, obj=<object object at 0x7f>, "
        "nested=<function f.<locals>.g at 0x1>, enum=<Mode.FAST: 1>, dtype=torch.bfloat16, "
        """dq="it's", esc='a\\'b\\n\\t\\\\\\x41\\u00e9', neg=-3, f=0.7723692, sci=1e-05, """
        "big=1.5E+10, ninf=-inf, pinf=inf, nan=nan, tup=(1, 'a'), one=(2,), empty=(), "
        "st={3, 1, 2}, d={1: 'x', 'k': [None, True, False]}, ell=[...], raw=b'\\x00', "
        "path=PosixPath('/m'))"
    )
    result = parse_server_args(text)
    assert result.complete and result.error is None
    args = result.args
    assert args["lora_paths"] == [
        {
            "__type__": "LoRARef",
            "lora_id": "1f",
            "lora_name": "a",
            "lora_path": "/p",
            "pinned": None,
        }
    ]
    assert args["hook"] == "<function my_hook at 0x7f3a2b1c>"
    assert args["obj"] == "<object object at 0x7f>"
    assert args["nested"] == "<function f.<locals>.g at 0x1>"
    assert args["enum"] == "<Mode.FAST: 1>"
    assert args["dtype"] == "torch.bfloat16"
    assert args["dq"] == "it's"
    assert args["esc"] == "a'b\n\t\\Aé"
    assert args["neg"] == -3
    assert args["f"] == 0.7723692
    assert args["sci"] == 1e-05
    assert args["big"] == 1.5e10
    assert args["ninf"] == float("-inf")
    assert args["pinf"] == float("inf")
    assert args["nan"] != args["nan"]
    assert args["tup"] == [1, "a"]
    assert args["one"] == [2]
    assert args["empty"] == []
    assert args["st"] == [1, 2, 3]
    assert args["d"] == {1: "x", "k": [None, True, False]}
    assert args["ell"] == ["..."]
    assert args["raw"] == "\x00"
    assert args["path"] == {"__type__": "PosixPath", "__args__": ["/m"]}


def test_secrets_are_redacted_at_parse_time_recursively() -> None:
    text = (
        f"ServerArgs(api_key='{SECRET}', admin_api_key=\"{SECRET}\", "
        f"lora_paths=[LoRARef(lora_name='a', hf_token='{SECRET}')], "
        f'model_loader_extra_config=\'{{"token": "{SECRET}"}}\', '
        f"tool_server='https://u:{SECRET}@tools', other={{'password': '{SECRET}'}})"
    )
    result = parse_server_args(text)
    assert result.complete
    assert SECRET not in repr(result)
    assert result.args["api_key"] == REDACTED
    assert result.args["lora_paths"] == [
        {"__type__": "LoRARef", "lora_name": "a", "hf_token": REDACTED}
    ]
    assert result.args["model_loader_extra_config"] == f'{{"token": "{REDACTED}"}}'
    assert result.args["tool_server"] == f"https://u:{REDACTED}@tools"
    assert result.args["other"] == {"password": REDACTED}


def long_repr() -> str:
    """The fixture 1 repr grown to exactly 60,000 characters with a long lora_paths list."""
    base = fixture_repr("startup-1-baseline.log")
    assert base.endswith(")")
    loras = ", ".join(
        f"LoRARef(lora_id='{i:032x}', lora_name='adapter-{i}', lora_path='/loras/{i}', pinned=None)"
        for i in range(400)
    )
    assert base.count("lora_paths=None, ") == 1
    text = base.replace("lora_paths=None, ", f"lora_paths=[{loras}], ")[:-1] + ", pad='')"
    assert len(text) < 60_000
    return text[:-2] + "x" * (60_000 - len(text)) + "')"


def test_line_split_by_journald_parses_once_joined() -> None:
    text = long_repr()
    assert len(text) == 60_000
    first, rest = text[:49152], text[49152:]
    assert len(rest) == 10848

    partial = parse_server_args(first, partial_ok=True)
    assert partial.complete is False
    assert partial.error is None
    assert not is_complete(first)
    assert partial.args["tp_size"] == 4
    assert partial.args["api_key"] == REDACTED
    assert "lora_paths" not in partial.args  # cut in half, so dropped

    strict = parse_server_args(first)
    assert strict.complete is False
    assert strict.error is not None

    whole = parse_server_args(first + rest)
    assert whole.complete and whole.error is None
    assert is_complete(first + rest)
    assert whole == parse_server_args(text)
    assert len(whole.args["lora_paths"]) == 400
    assert whole.args["lora_paths"][7]["lora_name"] == "adapter-7"
    assert set(whole.args["pad"]) == {"x"}
    assert SECRET not in repr(whole) and SECRET not in repr(partial)


def test_truncated_field_is_not_kept() -> None:
    """`tp_size=4` might be `tp_size=48` cut off: only fields followed by ',' or ')' count."""
    result = parse_server_args("ServerArgs(model_path='/m', tp_size=4", partial_ok=True)
    assert result == ServerArgsResult(args={"model_path": "/m"}, complete=False, error=None)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("ServerArgs(a=1, b=2 c=3)", "expected ',' or a closing bracket at offset 20"),
        ("ServerArgs(a=1, b=@)", "unexpected character '@' at offset 18"),
        ("[1, 2]", "expected ServerArgs(...) or {...}"),
        ("ServerArgs(a=1, b=[1, 2)", "unexpected ')' at offset 23"),
        ("ServerArgs(a=1, b={[1]: 2})", "unsupported dict key before offset 22"),
    ],
)
def test_malformed_input_keeps_what_came_before(text: str, error: str) -> None:
    result = parse_server_args(text)
    assert result.complete is False
    assert result.error == error
    assert result.args == ({"a": 1} if text.startswith("ServerArgs") else {})
    assert is_complete(text)  # a continuation could not repair it: do not wait


def test_trailing_text_after_closed_repr() -> None:
    result = parse_server_args("ServerArgs(a=1) extra")
    assert result.complete is True
    assert result.args == {"a": 1}
    assert result.error == "unexpected text after the closing bracket at offset 21"


@pytest.mark.parametrize(
    "text",
    ["", "Server", "ServerArgs(", "ServerArgs(a='x", "ServerArgs(a=-", "ServerArgs(a=1e-",
     "ServerArgs(a=<function f", "{'a': {'b': [1", "ServerArgs(a=torch.", "ServerArgs(a=[..",
     "ServerArgs(a='\\"],
)  # fmt: skip
def test_cut_off_text_is_not_complete(text: str) -> None:
    assert not is_complete(text)
    assert parse_server_args(text, partial_ok=True).error is None


def test_every_prefix_of_a_small_repr_is_truncated_not_malformed() -> None:
    text = (
        "ServerArgs(a='x\\'y', b=-1.5e-05, c=[1, (2,), {3}], d={'k': None}, e=<F.X: 'a>'>, "
        "f=LoRARef(n=b'z', p=True), g=torch.float16, h=-inf, i=[...])"
    )
    full = parse_server_args(text)
    assert full.complete
    for cut in range(len(text)):
        prefix = parse_server_args(text[:cut], partial_ok=True)
        assert (prefix.complete, prefix.error) == (False, None), text[:cut]
        assert prefix.args.items() <= full.args.items()
        assert not is_complete(text[:cut])


def test_canonical_field_and_renames() -> None:
    assert canonical_field("enable_piecewise_cuda_graph") == "piecewise_cuda_graph"
    assert canonical_field("disable_piecewise_cuda_graph") == "piecewise_cuda_graph"
    assert canonical_field("cuda_graph_backend_prefill") == "piecewise_cuda_graph"
    assert canonical_field("disable_cuda_graph") == "cuda_graph"
    assert canonical_field("cuda_graph_backend_decode") == "cuda_graph"
    assert canonical_field("flashinfer_allreduce_fusion_backend") == "flashinfer_allreduce_fusion"
    assert canonical_field("cuda_graph_max_bs_decode") == "cuda_graph_max_bs"
    assert canonical_field("tp_size") == "tp_size"
    assert RENAMES["disable_piecewise_cuda_graph"].meaning == "disable"


def test_normalized_settings_of_every_version(
    startup1: ServerArgsResult, startup2: ServerArgsResult
) -> None:
    common = {
        "tp_size": 4,
        "dp_size": 1,
        "ep_size": 1,
        "pp_size": 1,
        "model_path": "/models/Qwen3.5-122B-A10B",
        "served_model_name": "qwen3.5-122b-a10b",
        "attention_backend": "flashinfer",
        "chunked_prefill_size": 8192,
        "mem_fraction_static": 0.75,
        "max_running_requests": None,
        "cuda_graph_max_bs": 512,
        "moe_runner_backend": "auto",
        "kv_cache_dtype": "auto",
        "enable_multimodal": None,
    }
    assert normalized_settings(startup1.args) == {
        "piecewise_cuda_graph": True,
        "cuda_graph": True,
        "flashinfer_allreduce_fusion": False,
        # Off in both seed startups: a mamba model's no_buffer radix cache.
        "overlap_schedule": False,
        **common,
    }
    assert normalized_settings(startup2.args) == {
        "piecewise_cuda_graph": False,
        "cuda_graph": True,
        "flashinfer_allreduce_fusion": True,
        "overlap_schedule": False,
        **common,
    }
    assert normalized_settings(parse_server_args(DICT_REPR_0523).args) == {
        "piecewise_cuda_graph": False,
        "cuda_graph": True,
        "flashinfer_allreduce_fusion": True,
        "overlap_schedule": None,
        **common,
    }
    assert normalized_settings({}) == dict.fromkeys(
        [
            "piecewise_cuda_graph",
            "cuda_graph",
            "flashinfer_allreduce_fusion",
            "overlap_schedule",
            *common,
        ],
        None,
    )


def test_normalized_settings_0523_raw_flag_and_json_config() -> None:
    args = {
        "cuda_graph_backend_prefill": "breakable",
        "cuda_graph_config": '{"decode": {"backend": "disabled"}}',
    }
    settings = normalized_settings(args)
    assert settings["piecewise_cuda_graph"] is True
    assert settings["cuda_graph"] is False


def test_diff_of_the_two_fixtures(startup1: ServerArgsResult, startup2: ServerArgsResult) -> None:
    """The renamed PCG field is one change; the rest are the two flags and 0.5.10's new fields."""
    added, removed = "field added", "field removed"
    assert diff_server_args(startup1.args, startup2.args) == [
        FieldChange("disable_priority_preemption", None, False, added),
        FieldChange("disaggregation_prefill_pp", 1, None, removed),
        FieldChange("enable_adaptive_dispatch_to_encoder", None, False, added),
        FieldChange("enable_aiter_allreduce_fusion", None, False, added),
        FieldChange("enable_elastic_expert_backup", None, False, added),
        FieldChange("enable_flashinfer_allreduce_fusion", False, True, None),
        FieldChange("enable_fused_moe_sum_all_reduce", None, True, added),
        FieldChange("enable_hisparse", None, False, added),
        FieldChange("enable_mm_global_cache", None, False, added),
        FieldChange("enable_prefill_context_parallel", None, False, added),
        FieldChange("enable_ssl_refresh", None, False, added),
        FieldChange("enable_streaming_session", None, False, added),
        FieldChange("enforce_piecewise_cuda_graph", None, False, added),
        FieldChange("fp4_gemm_runner_backend", "flashinfer_cutlass", "auto", None),
        FieldChange("incremental_streaming_output", None, False, added),
        FieldChange("linear_attn_backend", None, "triton", added),
        FieldChange(
            "piecewise_cuda_graph",
            True,
            False,
            "renamed enable_piecewise_cuda_graph → disable_piecewise_cuda_graph",
            spelling="disable_piecewise_cuda_graph",
        ),
        FieldChange("pre_warm_nccl", None, False, added),
        FieldChange("prefill_cp_mode", None, "in-seq-split", added),
        FieldChange("speculative_ngram_branch_length", 18, None, removed),
        FieldChange("speculative_ngram_max_trie_depth", None, 18, added),
        FieldChange("stream_output", False, None, removed),
        FieldChange("use_ray", None, False, added),
    ]


def test_diff_same_version_reports_raw_fields() -> None:
    old = {"disable_piecewise_cuda_graph": False, "random_seed": 1, "a": None}
    new = {"disable_piecewise_cuda_graph": True, "random_seed": 2, "b": None, "c": 1}
    assert diff_server_args(old, new) == [
        FieldChange("c", None, 1, "field added"),
        FieldChange("disable_piecewise_cuda_graph", False, True, None),
    ]


def test_diff_across_0510_and_0523(startup2: ServerArgsResult) -> None:
    """Settings renamed into cuda_graph_config compare by meaning; same meaning, no change."""
    changes = diff_server_args(startup2.args, parse_server_args(DICT_REPR_0523).args)
    fields = {change.field for change in changes}
    assert not fields & {"piecewise_cuda_graph", "cuda_graph", "flashinfer_allreduce_fusion"}
    assert "cuda_graph_max_bs" not in fields
    assert FieldChange("cuda_graph_config.prefill.max_bs", None, 256, "field added") in changes
    assert "random_seed" not in fields


def test_diff_nested_and_typed_values() -> None:
    old = {"cuda_graph_config": {"decode": {"max_bs": 256}}, "x": True, "n": float("nan")}
    new = {"cuda_graph_config": {"decode": {"max_bs": 512}}, "x": 1, "n": float("nan")}
    assert diff_server_args(old, new) == [
        FieldChange("cuda_graph_config.decode.max_bs", 256, 512, None),
        FieldChange("x", True, 1, None),
    ]
