"""Tests for redact.py: what counts as a secret, and every way one is replaced."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sglang_sentinel.redact import (
    REDACTED,
    is_secret_key,
    launch_flags,
    redact_cmdline,
    redact_value,
    scrub_head,
    scrub_text,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "seed-flag-change"
SECRET = "sk-EXAMPLE-not-a-real-key"
# The only genuine secrets among the fields of the two fixture server_args lines (0.5.9, 0.5.10rc0).
REAL_SECRET_FIELDS = {"api_key", "admin_api_key", "ssl_keyfile_password"}


def fixture_field_names() -> set[str]:
    names: set[str] = set()
    for name in ("startup-1-baseline.log", "startup-2-flags-added.log"):
        text = (FIXTURES / name).read_text()
        line = next(line for line in text.splitlines() if "server_args=" in line)
        names.update(re.findall(r"[(,] ([a-z_0-9]+)=", line))
    return names


def fixture_cmdline(index: int) -> str:
    scenario = json.loads((FIXTURES / "scenario.json").read_text())
    return str(scenario["startups"][index]["cmdline"])


def test_fixture_fields_are_read() -> None:
    """Guard for the next test: both fixture lines yield the ~350 distinct field names."""
    names = fixture_field_names()
    assert len(names) > 340
    assert names >= REAL_SECRET_FIELDS


def test_only_genuine_secrets_among_real_server_args_fields() -> None:
    flagged = {name for name in fixture_field_names() if is_secret_key(name)}
    assert flagged == REAL_SECRET_FIELDS


@pytest.mark.parametrize(
    "name",
    [
        "api_key",
        "admin_api_key",
        "ssl_keyfile_password",
        "hf_token",
        "HF_TOKEN",
        "openai_api_key",
        "db_password",
        "client_secret",
        "aws_secret_access_key",
        "access_token",
        "use_auth_token",
        "token",
        "key",
        "password",
        "credentials",
        "google_credentials",
        "apiKey",
        "accessToken",
        "X-Api-Key",
        "Authorization",
        "api-key",
        "private_key",
        "api_keys",
        # issue 20: a qualified key with something after it
        "api_key_x",
        "api-key-x",
        "private_key_path",
        "admin_api_key_2",
    ],
)
def test_secret_names(name: str) -> None:
    assert is_secret_key(name)


@pytest.mark.parametrize(
    "name",
    [
        "max_total_num_tokens",
        "chunked_prefill_tokens",
        "max_prefill_tokens",
        "piecewise_cuda_graph_tokens",
        "piecewise_cuda_graph_max_tokens",
        "tokens",
        "tokenizer_path",
        "tokenizer_mode",
        "skip_tokenizer_init",
        "ssl_keyfile",
        "bucket_time_to_first_token",
        "kt_max_deferred_experts_per_token",
        "speculative_token_map",
        "eos_token",
        "cache_key",
        "sort_key",
        "keyfile",
        "num_tokens",
        "model_path",
        "",
    ],
)
def test_non_secret_names(name: str) -> None:
    assert not is_secret_key(name)


def test_redact_value_replaces_secret_fields_but_keeps_none() -> None:
    assert redact_value("api_key", SECRET) == REDACTED
    assert redact_value("admin_api_key", 12345) == REDACTED
    assert redact_value("api_key", None) is None
    assert redact_value("model_path", "/models/Qwen3.5-122B-A10B") == "/models/Qwen3.5-122B-A10B"
    assert redact_value("tp_size", 4) == 4


def test_redact_value_scrubs_url_credentials() -> None:
    assert (
        redact_value("otlp_traces_endpoint", "https://user:hunter22@otel.example:4318/v1")
        == f"https://user:{REDACTED}@otel.example:4318/v1"
    )
    assert redact_value("x", "redis://:pw123@cache:6379") == f"redis://:{REDACTED}@cache:6379"
    assert redact_value("x", "https://host/x?access_token=abc&page=2") == (
        f"https://host/x?access_token={REDACTED}&page=2"
    )
    assert redact_value("x", "localhost:4317") == "localhost:4317"


def test_redact_value_json_string_fields() -> None:
    value = redact_value("model_loader_extra_config", '{"token": "x", "n": 1}')
    assert json.loads(value) == {"token": REDACTED, "n": 1}
    nested = '{"backend": {"storage": {"aws_secret_access_key": "AKIA", "bucket": "b"}}}'
    assert json.loads(redact_value("hicache_storage_backend_extra_config", nested)) == {
        "backend": {"storage": {"aws_secret_access_key": REDACTED, "bucket": "b"}}
    }
    endpoint = '[{"endpoint": "tcp://u:p4ss@h:1"}]'
    assert json.loads(redact_value("kv_events_config", endpoint)) == [
        {"endpoint": f"tcp://u:{REDACTED}@h:1"}
    ]
    # Unchanged JSON keeps its original spelling.
    assert redact_value("json_model_override_args", '{ "a" : 1 }') == '{ "a" : 1 }'
    assert redact_value("model_loader_extra_config", "{}") == "{}"


def test_redact_value_unparseable_json_with_secret_key_is_replaced_whole() -> None:
    assert redact_value("model_loader_extra_config", "{'token': 'x'}") == REDACTED
    assert redact_value("kv_events_config", '{"password": "x"') == REDACTED
    assert redact_value("kv_events_config", "{'topic': 'kv'}") == "{'topic': 'kv'}"


def test_redact_value_plain_string_pairs_and_whole_tokens() -> None:
    assert redact_value("tool_server", "host=a token=abc") == f"host=a token={REDACTED}"
    assert redact_value("served_model_name", SECRET) == REDACTED
    assert redact_value("model_path", "/models/sk-llama-8b-instruct") == (
        "/models/sk-llama-8b-instruct"
    )


def test_redact_value_walks_containers() -> None:
    value: dict[str, Any] = {
        "lora": [{"__type__": "LoRARef", "hf_token": "hf_x", "lora_path": "/p"}],
        "n": None,
    }
    assert redact_value("lora_paths", value) == {
        "lora": [{"__type__": "LoRARef", "hf_token": REDACTED, "lora_path": "/p"}],
        "n": None,
    }
    assert value["lora"][0]["hf_token"] == "hf_x"  # the input is not mutated


def test_redact_value_too_deep_is_replaced_whole() -> None:
    deep: object = "x"
    for _ in range(200):
        deep = [deep]
    assert redact_value("cuda_graph_bs", deep) == REDACTED
    assert redact_value("kv_events_config", "[" * 100_000) == "[" * 100_000


def test_redact_cmdline_of_fixture() -> None:
    argv = redact_cmdline(fixture_cmdline(0))
    assert SECRET not in " ".join(argv)
    assert argv[:3] == ("/opt/sglang/.venv/bin/python3", "-m", "sglang.launch_server")
    assert argv[argv.index("--api-key") + 1] == REDACTED
    assert argv[-1] == "--enable-piecewise-cuda-graph"


@pytest.mark.parametrize(
    ("cmdline", "expected"),
    [
        (f"python -m x --api-key={SECRET} --port 1", ("python", "-m", "x", f"--api-key={REDACTED}", "--port", "1")),
        (f"x --admin-api-key {SECRET}", ("x", "--admin-api-key", REDACTED)),
        ("x --ssl-keyfile-password pw --ssl-keyfile /k.pem", ("x", "--ssl-keyfile-password", REDACTED, "--ssl-keyfile", "/k.pem")),
        ("x --hf-token hf_abc", ("x", "--hf-token", REDACTED)),
        ("x --api-key --port 1", ("x", "--api-key", "--port", "1")),
        ("x --dist-init-addr https://u:pw@h:5000", ("x", "--dist-init-addr", f"https://u:{REDACTED}@h:5000")),
        ("HF_TOKEN=hf_abc python -m x", (f"HF_TOKEN={REDACTED}", "python", "-m", "x")),
        ('x --model-loader-extra-config {"token": "abc", "n": 1}', ("x", "--model-loader-extra-config", '{"token":', f'"{REDACTED}",', '"n":', "1}")),
        ("x --cuda-graph-bs 1 2 4", ("x", "--cuda-graph-bs", "1", "2", "4")),
        # issue 20: a short option's value, a qualified key with a suffix
        (f"x -k {SECRET} --port 1", ("x", "-k", REDACTED, "--port", "1")),
        (f"x --port 1 -p {SECRET}", ("x", "--port", "1", "-p", REDACTED)),
        (f"x --api-key-x {SECRET} --private-key-path /k/a.pem", ("x", "--api-key-x", REDACTED, "--private-key-path", REDACTED)),
    ],
)  # fmt: skip
def test_redact_cmdline_forms(cmdline: str, expected: tuple[str, ...]) -> None:
    assert redact_cmdline(cmdline) == expected


def test_launch_flags_of_fixture() -> None:
    assert launch_flags(redact_cmdline(fixture_cmdline(1))) == (
        "--model-path /models/Qwen3.5-122B-A10B",
        "--served-model-name qwen3.5-122b-a10b",
        "--host 0.0.0.0",
        "--port 30000",
        "--tp-size 4",
        "--mem-fraction-static 0.75",
        "--reasoning-parser qwen3",
        "--tool-call-parser qwen3_coder",
        "--enable-metrics",
        f"--api-key {REDACTED}",
        "--enable-piecewise-cuda-graph",
        "--enable-flashinfer-allreduce-fusion",
        "--enable-fused-moe-sum-all-reduce",
    )


def test_launch_flags_normalizes_equals_and_redacts_again() -> None:
    argv = ("python", "-m", "x", "--tp-size=4", "--api-key", SECRET, "--cuda-graph-bs", "1", "2")
    assert launch_flags(argv) == ("--tp-size 4", f"--api-key {REDACTED}", "--cuda-graph-bs 1 2")
    assert launch_flags(("python", "serve.py")) == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"bad args: api_key='{SECRET}', tp_size=4", f"bad args: api_key='{REDACTED}', tp_size=4"),
        ('{"api_key": "abc", "n": 1}', f'{{"api_key": "{REDACTED}", "n": 1}}'),
        (f"launched with --api-key {SECRET} --port 1", f"launched with --api-key {REDACTED} --port 1"),
        ("--hf-token=hf_abc done", f"--hf-token={REDACTED} done"),
        ("Authorization: Bearer abc.def-123", f"Authorization: Bearer {REDACTED}"),
        (f"key {SECRET} rejected", f"key {REDACTED} rejected"),
        ("token hf_" + "a" * 34 + " expired", f"token {REDACTED} expired"),
        ("connect postgres://app:s3cr3t@db/x failed", f"connect postgres://app:{REDACTED}@db/x failed"),
        ("password=None", "password=None"),
        ("max_total_num_tokens=507050, max_running_requests=48", "max_total_num_tokens=507050, max_running_requests=48"),
        ("sk-short", "sk-short"),
        # SGLang's batch lines count tokens after `#`: counts, not credentials.
        ("Decode batch, #running-req: 48, #token: 90000, token usage: 0.42", "Decode batch, #running-req: 48, #token: 90000, token usage: 0.42"),
        ("Decode batch. #full token: 519, full token usage: 0.00, #swa token: 519", "Decode batch. #full token: 519, full token usage: 0.00, #swa token: 519"),
        ("Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00", "Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00"),
        # ... but only a count: anything else there, and a number after a plain `token:`, is redacted.
        ("#token: hf_abc", f"#token: {REDACTED}"),
        ("token: 90000", f"token: {REDACTED}"),
        ("#api_key: 90000", f"#api_key: {REDACTED}"),
        ("Disable piecewise CUDA graph because --disable-piecewise-cuda-graph is set", "Disable piecewise CUDA graph because --disable-piecewise-cuda-graph is set"),
    ],
)  # fmt: skip
def test_scrub_text(text: str, expected: str) -> None:
    assert scrub_text(text) == expected


def test_scrub_text_is_idempotent() -> None:
    text = f"api_key='{SECRET}' Bearer abcdef --api-key x https://u:p@h"
    once = scrub_text(text)
    assert scrub_text(once) == once


def test_scrub_text_is_fast() -> None:
    """A short line costs microseconds; 500 kB of hostile text well under a second (CPU time,
    so a loaded machine's waiting does not count)."""
    line = "[2026-03-09 21:34:27 TP0] Load weight end. elapsed=41.21 s, avail mem=20.66 GB"
    start = time.process_time()
    for _ in range(10_000):
        scrub_text(line)
    assert time.process_time() - start < 0.5
    for hostile in ("a" * 500_000, "-" * 500_000, "sk-" * 170_000, "://" * 170_000):
        start = time.process_time()
        scrub_text(hostile)
        assert time.process_time() - start < 1.0


_WORDS = st.sampled_from(
    ["load", "weight", "end.", "mem=20.66", "GB", "x" * 40, "token:", "#token: 900", "a=b,"]
)
_SECRETS = st.sampled_from(
    [
        f"api_key={SECRET}",
        f"--api-key {SECRET}",
        f"Authorization: Bearer {SECRET}",
        f"https://user:{SECRET}@example.com/x",
        "hf_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7",
    ]
)


@given(
    st.lists(_WORDS, max_size=60),
    _SECRETS,
    st.lists(_WORDS, max_size=60),
    st.integers(min_value=60, max_value=200),
)
def test_scrub_head_is_the_head_of_the_whole_text_redacted(
    before: list[str], secret: str, after: list[str], keep: int
) -> None:
    """A secret anywhere, the cut anywhere (inside the secret too): the head is what redacting
    the whole text and cutting it gives, and no secret is in it."""
    text = " ".join([*before, secret, *after])
    head = scrub_head(text, keep)
    assert head == scrub_text(text)[:keep]
    assert SECRET not in head and "A1b2C3d4E5f6G7h8" not in head


def test_scrub_head_costs_what_its_length_costs() -> None:
    """1 MB of text full of secret-looking pairs: the head costs what `keep` characters cost
    (CPU time: a loaded machine's waiting does not count); the whole text costs far more."""
    text = "api_key=abc token: x, " * 50_000
    start = time.process_time()
    for _ in range(10):
        head = scrub_head(text, 2000)
    per_call = (time.process_time() - start) / 10
    assert len(head) == 2000 and "abc" not in head
    start = time.process_time()
    scrub_text(text)
    whole = time.process_time() - start
    assert per_call < whole / 20, (per_call, whole)
