"""Rule loading, validation and matching: the shipped pack, the seed fixtures, broken rule dirs."""

from __future__ import annotations

import importlib.resources
import os
import re
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from journaltools import read_fixture_log, seed_fixture_dir
from rulefiles import GOOD_RULE, TS

from sglang_sentinel.errors import RuleError
from sglang_sentinel.model import Rank, RuleMatch
from sglang_sentinel.rules import RuleSet, check_rules, default_rules_dir, load_rules
from sglang_sentinel.rules.ruleset import convert
from sglang_sentinel.rules.shapes import split_prefix

MOE_UP = "E=256,N=256,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition.json"
MOE_DOWN = "E=256,N=256,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition_down.json"


@pytest.fixture(scope="module")
def pack() -> RuleSet:
    return load_rules([default_rules_dir()])


def fixture_lines(name: str) -> list[str]:
    """The journal messages of a seed fixture .log, with the escaped CR/ESC bytes made real."""
    return [raw.decode("utf-8") for _, raw in read_fixture_log(seed_fixture_dir() / name)]


def all_matches(rule_set: RuleSet, lines: list[str]) -> list[RuleMatch]:
    return [m for line in lines for m in rule_set.match(line)]


def facts_of(matches: list[RuleMatch], rule_id: str, tp: int | None = 0) -> list[dict[str, object]]:
    return [dict(m.facts) for m in matches if m.rule_id == rule_id and m.rank.tp == tp]


# --- the shipped pack ----------------------------------------------------------------------


def test_shipped_pack_has_no_problems() -> None:
    assert check_rules([default_rules_dir()]) == []


def test_default_rules_dir_is_the_package_pack_and_the_checkout_rules_link() -> None:
    pack = Path(str(importlib.resources.files("sglang_sentinel.rules") / "pack"))
    assert default_rules_dir() == pack
    assert (Path(__file__).resolve().parents[2] / "rules").resolve() == pack.resolve()
    assert sorted(p.name for p in pack.glob("*.yaml"))[-1] == "policy.yaml"


@pytest.mark.slow
def test_the_wheel_carries_the_rule_pack(tmp_path: Path) -> None:
    """The pack is package data: a wheel has every rule file, where importlib.resources looks."""
    repo = Path(__file__).resolve().parents[2]
    # A plain build: package data does not depend on the compiled hot path, and `make ci`
    # exports SENTINEL_MYPYC=1, with which this build compiled it with mypyc (70 s, not 10).
    env = {k: v for k, v in os.environ.items() if k != "SENTINEL_MYPYC"}
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "-w",
            str(tmp_path),
            str(repo),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("sglang_sentinel-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"sglang_sentinel/rules/pack/{p.name}" for p in (repo / "rules").glob("*.yaml")}
    assert len(expected) >= 6 and expected <= names


def test_every_rule_has_a_positive_sample_and_a_description(pack: RuleSet) -> None:
    assert len(pack.rules) >= 30
    for rule in pack.rules:
        assert rule.samples, rule.id
        assert rule.description, rule.id


def test_every_sample_passes_through_the_public_match(pack: RuleSet) -> None:
    """Samples yield their exact facts via RuleSet.match (pre-filters included); negatives don't."""
    for rule in pack.rules:
        for sample in rule.samples:
            got = [dict(m.facts) for m in pack.match(sample.line) if m.rule_id == rule.id]
            assert len(got) == 1, (rule.id, sample.line)
            expected = {k: tuple(v) if isinstance(v, list) else v for k, v in sample.facts.items()}
            assert got[0] == expected, (rule.id, sample.line)
        for line in rule.no_match:
            assert rule.id not in [m.rule_id for m in pack.match(line)], (rule.id, line)


def test_runtime_scope_only_on_batch_lines(pack: RuleSet) -> None:
    runtime = {rule.id for rule in pack.rules if rule.scope == "runtime"}
    assert runtime == {
        "prefill_batch",
        "decode_batch",
        "kv_pool_retract",
        "runtime_out_of_memory",
    }


def test_a_rule_with_an_unknown_fact_name_fails_the_check(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text(
        "version: 1\n"
        "rules:\n"
        "  - id: mystery\n"
        "    contains: 'mystery='\n"
        "    regex: 'mystery=(?P<mystery_value>\\d+)'\n"
        "    facts: {mystery_value: int}\n"
        "    samples:\n"
        "      match: [{line: 'mystery=3', facts: {mystery_value: 3}}]\n"
    )
    problems = check_rules([tmp_path])
    assert any(
        "mystery" in p and "'mystery_value' is not a fact the sentinel knows" in p for p in problems
    ), problems


# --- the seed fixtures ---------------------------------------------------------------------


def test_startup_1_baseline_facts(pack: RuleSet) -> None:
    lines = fixture_lines("startup-1-baseline.log")
    matches = all_matches(pack, lines)
    assert facts_of(matches, "capacity_summary") == [
        {
            "max_total_num_tokens": 507050,
            "chunked_prefill_size": 8192,
            "max_prefill_tokens": 16384,
            "max_running_requests": 48,
            "context_len": 262144,
            "available_gpu_mem_gb": 20.66,
        }
    ]
    assert [m.rank for m in matches if m.rule_id == "capacity_summary"] == [Rank(tp=0)]
    assert facts_of(matches, "load_weight_begin") == [{"load_avail_mem_gb": 93.72}]
    begin_by_tp = {
        m.rank.tp: m.facts["load_avail_mem_gb"] for m in matches if m.rule_id == "load_weight_begin"
    }
    assert begin_by_tp == {0: 93.72, 1: 93.74, 2: 93.74, 3: 93.73}
    assert facts_of(matches, "load_weight_end") == [
        {
            "weight_load_seconds": 71.94,
            "model_arch": "Qwen3_5MoeForConditionalGeneration",
            "weight_mem_gb": 59.3,
        }
    ]
    assert facts_of(matches, "kv_cache_dtype") == [{"kv_cache_dtype": "torch.bfloat16"}]
    assert facts_of(matches, "kv_cache_allocated") == [{"kv_cache_tokens": 507050}]
    assert facts_of(matches, "mamba_cache_allocated") == [{"mamba_cache_size": 145}]
    assert facts_of(matches, "memory_pool_end") == [{"memory_pool_avail_gb": 23.34}]
    assert facts_of(matches, "cuda_graph_capture_begin") == [{"cuda_graph": True}]
    assert facts_of(matches, "cuda_graph_capture_bs") == [{"cuda_graph_max_bs": 48}]
    assert facts_of(matches, "cuda_graph_capture_end") == [
        {"cuda_graph": True, "cuda_graph_mem_gb": 0.74}
    ]
    assert facts_of(matches, "piecewise_capture_begin") == [{"piecewise_cuda_graph": True}]
    assert facts_of(matches, "piecewise_capture_end") == [{"piecewise_cuda_graph": True}]
    assert facts_of(matches, "moe_config_missing") == [
        {"moe_config_missing": (MOE_UP,)},
        {"moe_config_missing": (MOE_DOWN,)},
    ]
    assert facts_of(matches, "server_ready", tp=None) == [{"ready": True}]
    server_args = facts_of(matches, "server_args", tp=None)
    assert len(server_args) == 1
    repr_ = server_args[0]["server_args_repr"]
    assert isinstance(repr_, str)
    assert repr_.startswith("ServerArgs(model_path='/models/Qwen3.5-122B-A10B', ")
    assert repr_.endswith(")")
    assert "enable_piecewise_cuda_graph=True" in repr_
    assert facts_of(matches, "decode_batch") == [
        {"running_requests": 3, "token_usage": 0.03, "gen_throughput": 156.84, "queued_requests": 0}
    ]
    assert facts_of(matches, "prefill_batch")[-1] == {
        "token_usage": 0.03,
        "running_requests": 2,
        "queued_requests": 0,
        "input_throughput": 7012.55,
    }
    assert Counter(m.rule_id for m in matches) == {
        "server_args": 1,
        "load_weight_begin": 4,
        "load_weight_end": 4,
        "kv_cache_dtype": 1,
        "mamba_cache_allocated": 4,
        "kv_cache_allocated": 4,
        "memory_pool_end": 4,
        "cuda_graph_capture_begin": 4,
        "cuda_graph_capture_bs": 1,
        "moe_config_missing": 8,
        "cuda_graph_capture_end": 4,
        "piecewise_capture_begin": 4,
        "piecewise_capture_end": 4,
        "capacity_summary": 1,
        # The same summary line read key by key (a reworded summary keeps the keys it kept).
        **{f"capacity_key_{key}": 1 for key in facts_of(matches, "capacity_summary")[0]},
        "prefill_batch": 3,
        "server_ready": 1,
        "decode_batch": 1,
        # rules/60-downgrades.yaml: the mamba overlap disable and PCIe custom all-reduce.
        "overlap_schedule_disabled": 1,
        "custom_all_reduce_disabled": 4,
    }


def test_startup_2_flags_added_facts(pack: RuleSet) -> None:
    lines = fixture_lines("startup-2-flags-added.log")
    matches = all_matches(pack, lines)
    summary = facts_of(matches, "capacity_summary")
    assert summary == [
        {
            "max_total_num_tokens": 277552,
            "chunked_prefill_size": 8192,
            "max_prefill_tokens": 16384,
            "max_running_requests": 26,
            "context_len": 262144,
            "available_gpu_mem_gb": 20.64,
        }
    ]
    assert facts_of(matches, "load_weight_begin") == [{"load_avail_mem_gb": 87.07}]
    assert facts_of(matches, "load_weight_end") == [
        {
            "weight_load_seconds": 70.12,
            "model_arch": "Qwen3_5MoeForConditionalGeneration",
            "weight_mem_gb": 59.3,
        }
    ]
    assert facts_of(matches, "kv_cache_allocated") == [{"kv_cache_tokens": 277552}]
    assert facts_of(matches, "mamba_cache_allocated") == [{"mamba_cache_size": 79}]
    disabled = [m for m in matches if m.rule_id == "piecewise_disabled"]
    assert sorted(m.rank.tp for m in disabled if m.rank.tp is not None) == [0, 1, 2, 3]
    for m in disabled:
        assert dict(m.facts) == {
            "piecewise_cuda_graph": False,
            "piecewise_cuda_graph_disabled_reason": "--disable-piecewise-cuda-graph is set",
        }
    assert not [m for m in matches if m.rule_id.startswith("piecewise_capture")]
    missing = {item for m in matches for item in _names(m.facts.get("moe_config_missing"))}
    assert missing == {MOE_UP, MOE_DOWN}
    assert facts_of(matches, "cuda_graph_capture_end") == [
        {"cuda_graph": True, "cuda_graph_mem_gb": 0.55}
    ]
    assert facts_of(matches, "server_ready", tp=None) == [{"ready": True}]
    repr_ = facts_of(matches, "server_args", tp=None)[0]["server_args_repr"]
    assert isinstance(repr_, str)
    assert "disable_piecewise_cuda_graph=True" in repr_
    assert "enable_fused_moe_sum_all_reduce=True" in repr_
    assert facts_of(matches, "prefill_batch")[1] == {
        "token_usage": 0.03,
        "running_requests": 2,
        "queued_requests": 1,
        "input_throughput": 5311.4,
    }
    assert facts_of(matches, "decode_batch") == [
        {"running_requests": 3, "token_usage": 0.05, "gen_throughput": 149.27, "queued_requests": 0}
    ]
    assert not [m for m in matches if "failure_reason" in m.facts]


def test_fixture_noise_lines_match_nothing(pack: RuleSet) -> None:
    noise = [
        "[Gloo] Rank 0 is connected to 3 peer ranks. Expected number of connected peer ranks is : 3",
        '[2026-03-09 23:10:00] INFO:     10.20.0.15:52018 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        "[2026-03-09 23:02:41] WARNING server_args.py:6551: \x1b[1;33mThe command line argument "
        "'--enable-piecewise-cuda-graph' is deprecated and will be removed in future versions."
        "\x1b[0m",
        "Capturing batches (bs=26 avail_mem=21.17 GB):   0%|          | 0/8 [00:00<?, ?it/s]\r"
        "Capturing batches (bs=1 avail_mem=20.65 GB): 100%|##########| 8/8 [00:06<00:00,  1.24it/s]",
        "[2026-03-09 21:31:26 TP0] Using triton_attn as multimodal attention backend.",
        "sglang-qwen.service: Deactivated successfully.",
    ]
    for line in noise:
        assert pack.match(line) == [], line


# --- prefix and conversion -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "body", "rank"),
    [
        ("[2026-03-09 21:34:27 DP1 PP0 TP3 EP3] x y", "x y", Rank(dp=1, pp=0, tp=3, ep=3)),
        ("[2026-03-09 21:31:15.123 TP0] x", "x", Rank(tp=0)),
        ("[2026-03-09 21:31:15 TP2 EP2] x", "x", Rank(tp=2, ep=2)),
        ("[2026-03-09 21:31:15 DP1 ATTN_CP1 MOE_DP1 TP5] x", "x", Rank(dp=1, tp=5)),
        ("[2026-03-09 21:31:15] x", "x", Rank()),
        ("[2026-03-09 21:31:15] WARNING server_args.py:2326: x", "x", Rank()),
        ("[2026-03-09 21:31:15 TP1] INFO model_runner.py:12: x", "x", Rank(tp=1)),
        ("WARNING server_args.py:2326: x", "x", Rank()),
        ("x", "x", Rank()),
        ("[Gloo] Rank 0 is connected", "[Gloo] Rank 0 is connected", Rank()),
        ("[2026-03-09 21:31:15] INFO:     Uvicorn", "INFO:     Uvicorn", Rank()),
        ("[2026-03-09 21:31:15 TP99999999999] x", "x", Rank()),
    ],
)
def test_split_prefix(line: str, body: str, rank: Rank) -> None:
    assert split_prefix(line) == (body, rank)


def test_rank_is_primary_only_for_rank_zero_or_no_prefix(pack: RuleSet) -> None:
    line = "Load weight begin. avail mem=93.72 GB"
    assert pack.match(line)[0].rank.is_primary
    assert pack.match("[2026-03-09 21:31:25 DP0 TP0 EP0] " + line)[0].rank.is_primary
    assert not pack.match("[2026-03-09 21:31:25 DP1 TP0] " + line)[0].rank.is_primary


@pytest.mark.parametrize(
    ("kind", "raw", "value"),
    [
        ("int", "507050", 507050),
        ("int", "-1", -1),
        ("int", "12x", None),
        ("int", "9" * 5000, None),
        ("float", "20.66", 20.66),
        ("float", "1.2.3", None),
        ("gb", "20.66", 20.66),
        ("gb", "20.66 GB", 20.66),
        ("gb", "3GiB", 3.0),
        ("bool", "True", True),
        ("bool", "false", False),
        ("bool", "0", False),
        ("bool", "yes", None),
        ("str", "torch.bfloat16", "torch.bfloat16"),
        ("list", "a.json", ("a.json",)),
        ("nope", "1", None),
    ],
)
def test_convert(kind: str, raw: str, value: object) -> None:
    assert convert(kind, raw) == value
    assert type(convert(kind, raw)) is type(value)


# --- rule files: validation ----------------------------------------------------------------


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def test_broken_rules_dir_reports_every_problem_at_once(tmp_path: Path) -> None:
    bad_yaml = write(tmp_path, "01-bad-yaml.yaml", "version: 1\nrules:\n  - id: x\n   bad: [\n")
    broken = write(
        tmp_path,
        "02-broken.yaml",
        """\
version: 1
rules:
  - id: bad_regex
    contains: "abc"
    regex: 'abc(?P<context_len>'
    facts: {context_len: int}
    samples: {match: [{line: "abc1", facts: {context_len: 1}}]}
  - id: missing_group
    contains: "abc"
    regex: 'abc(?P<y>\\d+)'
    facts: {context_len: int}
    samples: {match: [{line: "abc1", facts: {context_len: 1}}]}
  - id: failing_positive
    contains: "Load weight"
    regex: '^Load weight begin\\. avail mem=(?P<load_avail_mem_gb>\\d+) GB'
    facts: {load_avail_mem_gb: gb}
    samples:
      match:
        - line: "[2026-03-09 21:31:25 TP0] Load weight begin. avail mem=93.72 GB"
          facts: {load_avail_mem_gb: 93.72}
  - id: wrong_value
    contains: "zzz "
    regex: '^zzz (?P<max_prefill_tokens>\\d+)'
    facts: {max_prefill_tokens: int}
    samples:
      match: [{line: "[2026-03-09 21:31:25 TP0] zzz 5", facts: {max_prefill_tokens: 6}}]
  - id: matching_negative
    contains: "qqq"
    regex: 'qqq'
    facts: {}
    samples:
      match: [{line: "qqq", facts: {}}]
      no_match: ["[2026-03-09 21:31:25] qqq again"]
  - id: unknown_key
    contains: "www"
    regex: 'www'
    colour: red
    samples: {match: [{line: "www", facts: {}}]}
  - id: unknown_key
    contains: "vvv"
    regex: 'vvv'
    samples: {match: [{line: "vvv", facts: {}}]}
  - id: Bad-Id
    contains: "uuu"
    regex: 'uuu'
    samples: {match: [{line: "uuu", facts: {}}]}
  - id: no_samples
    contains: ""
    regex: 'ttt'
    scope: sometimes
    facts: {kv_cache_dtype: {type: decimal}}
  - contains: "sss"
    regex: 'sss'
    samples: {match: [{line: "sss", facts: {}}]}
""",
    )
    with pytest.raises(RuleError) as caught:
        load_rules([tmp_path])
    problems = caught.value.problems
    assert problems == check_rules([tmp_path])
    b, y = str(broken), str(bad_yaml)
    expected_starts = [
        f"{y}:-: invalid YAML at line 4",
        f"{b}:bad_regex: regex does not compile:",
        f"{b}:missing_group: fact 'context_len' needs the named group (?P<context_len>...) in the regex",
        f"{b}:failing_positive: positive sample 1 does not match",
        f"{b}:wrong_value: positive sample 1 yields wrong facts (max_prefill_tokens=5, expected 6)",
        f"{b}:matching_negative: negative sample 1 matches this rule but must not",
        f"{b}:unknown_key: unknown key 'colour'",
        f"{b}:unknown_key: duplicate rule id in this file",
        f"{b}:Bad-Id: id must match [a-z][a-z0-9_]*",
        f"{b}:no_samples: `contains` must be a non-empty literal string",
        f"{b}:no_samples: `scope` must be startup or runtime, found 'sometimes'",
        f"{b}:no_samples: fact 'kv_cache_dtype' has invalid type 'decimal'",
        f"{b}:no_samples: `samples` with at least one `match` sample is required",
        f"{b}:-: rules[9] has no `id`",
    ]
    for start in expected_starts:
        assert [p for p in problems if p.startswith(start)], (start, problems)
    assert len(problems) == len(expected_starts)
    for problem in problems:
        assert re.match(r"^[^:]+:[^:]+: \S", problem), problem


def test_top_level_schema_problems(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", "version: 2\nextra: 1\nrules: {}\n")
    assert check_rules([tmp_path]) == [
        f"{path}:-: unknown top-level key 'extra' (allowed: version, rules, downgrade_words)",
        f"{path}:-: `version` must be 1, found 2",
        f"{path}:-: `rules` must be a list of rules",
    ]


def test_duplicate_yaml_keys_are_an_error(tmp_path: Path) -> None:
    text = GOOD_RULE.format(rid="a", ts=TS, value="1.5").replace(
        "    contains:", "    regex: 'x'\n    contains:"
    )
    path = write(tmp_path, "a.yaml", text)
    problems = check_rules([tmp_path])
    assert len(problems) == 1
    assert problems[0].startswith(f"{path}:-: invalid YAML at line ")
    assert "duplicate key 'regex'" in problems[0]


def test_missing_rules_dir_is_a_problem(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    assert check_rules([missing]) == [
        f"{missing}:-: rules directory does not exist or is not a directory"
    ]


def test_overlapping_sample_needs_also_matches(tmp_path: Path) -> None:
    first = GOOD_RULE.format(rid="first", ts=TS, value="1.5")
    second = GOOD_RULE.format(rid="second", ts=TS, value="2.5")
    path = write(tmp_path, "a.yaml", first + second.split("rules:\n", 1)[1])
    problems = check_rules([tmp_path])
    assert len(problems) == 2
    assert problems[0].startswith(f"{path}:first: positive sample 1 also matches rule 'second'")
    assert problems[1].startswith(f"{path}:second: positive sample 1 also matches rule 'first'")
    fixed = first.replace("    samples:\n", "    also_matches: [second]\n    samples:\n")
    fixed_second = second.replace("    samples:\n", "    also_matches: [first]\n    samples:\n")
    write(tmp_path, "a.yaml", fixed + fixed_second.split("rules:\n", 1)[1])
    assert check_rules([tmp_path]) == []


def test_also_matches_unknown_rule_is_a_problem(tmp_path: Path) -> None:
    text = GOOD_RULE.format(rid="a", ts=TS, value="1.5").replace(
        "    samples:\n", "    also_matches: [ghost]\n    samples:\n"
    )
    path = write(tmp_path, "a.yaml", text)
    assert check_rules([tmp_path]) == [f"{path}:a: also_matches names unknown rule 'ghost'"]


def test_later_dir_overrides_rule_with_same_id(tmp_path: Path) -> None:
    base, extra = tmp_path / "base", tmp_path / "extra"
    write(base, "10-x.yaml", GOOD_RULE.format(rid="load_begin", ts=TS, value="1.5"))
    override = GOOD_RULE.format(rid="load_begin", ts=TS, value="2.5").replace(
        "load_avail_mem_gb: gb", "load_avail_mem_gb: {type: gb, value: 9.5}"
    )
    override = override.replace("{load_avail_mem_gb: 2.5}", "{load_avail_mem_gb: 9.5}")
    write(extra, "10-x.yaml", override)
    rule_set = load_rules([base, extra])
    assert rule_set.ids == ("load_begin",)
    [match] = rule_set.match(TS + "Load weight begin. avail mem=7.25 GB")
    assert dict(match.facts) == {"load_avail_mem_gb": 9.5}
    # the same id in a later *file* of one dir overrides too
    write(base, "20-y.yaml", override)
    assert dict(load_rules([base]).match(TS + "Load weight begin. avail mem=7.25 GB")[0].facts) == {
        "load_avail_mem_gb": 9.5
    }


def test_policy_yaml_and_other_files_are_ignored(tmp_path: Path) -> None:
    write(tmp_path, "policy.yaml", "checks: {max_running_requests_drop: {severity: critical}}\n")
    write(tmp_path, "notes.txt", "not yaml: [")
    write(tmp_path, "a.yaml", GOOD_RULE.format(rid="a", ts=TS, value="1.5"))
    assert load_rules([tmp_path]).ids == ("a",)


def test_conversion_failure_on_a_live_line_is_no_match(tmp_path: Path) -> None:
    text = """\
version: 1
rules:
  - id: flag
    contains: "flag="
    regex: '^flag=(?P<cuda_graph>\\w+)'
    facts: {cuda_graph: bool}
    samples:
      match: [{line: "flag=True", facts: {cuda_graph: true}}]
"""
    write(tmp_path, "a.yaml", text)
    rule_set = load_rules([tmp_path])
    assert [dict(m.facts) for m in rule_set.match("flag=false")] == [{"cuda_graph": False}]
    assert rule_set.match("flag=maybe") == []


def test_rule_without_literal_start_is_found_by_the_gate(tmp_path: Path) -> None:
    """Rules whose regex has no anchored literal start go through the literal gate."""
    text = """\
version: 1
rules:
  - id: anywhere
    contains: "needle"
    regex: '(?:hay|straw)?needle(?P<context_len>\\d+)'
    facts: {context_len: int}
    samples:
      match:
        - {line: "[2026-03-09 21:31:25 TP1] lots of hayneedle42 here", facts: {context_len: 42}}
      no_match: ["needle"]
"""
    write(tmp_path, "a.yaml", text)
    rule_set = load_rules([tmp_path])
    [match] = rule_set.match("x" * 1000 + " needle7")
    assert dict(match.facts) == {"context_len": 7}
    assert match.rank == Rank()


def test_rule_set_is_immutable(pack: RuleSet) -> None:
    with pytest.raises(AttributeError):
        pack.rules = ()  # type: ignore[misc]
    assert "capacity_summary" in pack.ids
    assert "nope" not in pack.ids


def _names(value: object) -> tuple[str, ...]:
    """A list fact's items (a tuple of names), or none."""
    return tuple(str(v) for v in value) if isinstance(value, tuple) else ()


def test_a_rule_id_is_at_most_as_long_as_a_baseline_file_lets_it_be(tmp_path: Path) -> None:
    """A rule id of 129 characters is refused when the rules load (it made a baseline export
    that every import refused); 128 load, the bound a baseline file has for the names it keeps."""
    from sglang_sentinel.rules.files import ID_CHARS
    from sglang_sentinel.state.baseline_file import NAME_CHARS

    assert ID_CHARS == NAME_CHARS
    for length, fine in ((ID_CHARS, True), (ID_CHARS + 1, False)):
        rule_id = "r" * length
        (tmp_path / "10-long.yaml").write_text(
            f"version: 1\nrules:\n  - id: {rule_id}\n    contains: 'qqq'\n    regex: 'qqq'\n"
            "    samples: {match: [{line: 'qqq', facts: {}}]}\n"
        )
        problems = check_rules([tmp_path])
        if fine:
            assert problems == []
        else:
            assert problems == [
                f"{tmp_path / '10-long.yaml'}:{rule_id}: id has 129 characters, more than 128"
            ]
