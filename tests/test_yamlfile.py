"""The one strict YAML loader: every file kind refuses a duplicate key, named by its line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from rulefiles import GOOD_RULE, TS

from sglang_sentinel import yamlfile
from sglang_sentinel.compare import load_policy
from sglang_sentinel.config import load_config
from sglang_sentinel.errors import ConfigError
from sglang_sentinel.rules import check_rules
from sglang_sentinel.state import BaselineFileError, read_document
from sglang_sentinel.state.baseline_file import content_sha256
from sglang_sentinel.yamlfile import YamlError, YamlProblem, load_json, load_yaml


def problems(text: str) -> list[str]:
    with pytest.raises(YamlError) as caught:
        load_yaml(text)
    return [str(p) for p in caught.value.problems]


# -- the three file kinds -----------------------------------------------------------------------


_DUP = "(first on line {}; the later value would silently win)"


@pytest.mark.parametrize(
    ("load", "text", "problems"),
    [
        (load_config, "units: [a]\nalertmanager:\n  urls: [http://a:9093]\n  urls: [http://b:9093]\n",
         ["line 4: duplicate key 'urls' " + _DUP.format(3)]),
        # The rest of a config is still checked: every problem at once.
        (load_config, "units: [a]\nunits: [b]\nunitz: [c]\n",
         ["line 2: duplicate key 'units' " + _DUP.format(1),
          "unknown key 'unitz' (did you mean 'units'?)"]),
        # Bug fixed: the policy file silently kept the later of two equal keys.
        (load_policy, "version: 1\nchecks:\n  cuda_graph_disabled: {severity: critical}\n"
         "  cuda_graph_disabled: {severity: info}\n",
         ["line 4: duplicate key 'cuda_graph_disabled' " + _DUP.format(3)]),
        # Was a multi-line dump of PyYAML's exception.
        (load_policy, "version: 1\nchecks: x: y\n",
         ["line 2, column 10: invalid YAML: mapping values are not allowed here"]),
    ],
    ids=["config", "config-and-more", "policy", "policy-syntax"],
)  # fmt: skip
def test_config_and_policy_problems_name_their_line(
    tmp_path: Path, load: Callable[[Path], object], text: str, problems: list[str]
) -> None:
    path = tmp_path / "file.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load(path)
    assert caught.value.problems == [f"{path}: {problem}" for problem in problems]


def test_rule_file_duplicate_key_is_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    rule = GOOD_RULE.format(rid="a", ts=TS, value="1.5")
    path.write_text(
        rule.replace("    facts:\n", "    scope: startup\n    scope: runtime\n    facts:\n")
    )
    assert check_rules([tmp_path]) == [
        f"{path}:-: invalid YAML at line 8: duplicate key 'scope' (first on line 7; the later "
        "value would silently win)"
    ]


def test_baseline_file_with_a_duplicate_key_is_refused(tmp_path: Path) -> None:
    """Bug fixed: a baseline file saying two things about one fact imported the later one."""
    body: dict[str, Any] = {
        "model": "m",
        "tp_size": "1",
        "started_at": 1.0,
        "ready_at": 2.0,
        "facts": {"max_running_requests": 256},
        "launch_flags": [],
        "server_args": {},
    }
    doc = {
        "format": "sglang-sentinel-baseline",
        "version": 1,
        "sha256": content_sha256(body),
        "gpu": "",
        "baseline": body,
    }
    text = json.dumps(doc).replace(
        '"max_running_requests": 256', '"max_running_requests": 48, "max_running_requests": 256'
    )
    path = tmp_path / "base.json"
    path.write_text(text)
    with pytest.raises(BaselineFileError) as caught:
        read_document(path)
    assert str(caught.value) == (
        f"{path}: not a baseline file (invalid JSON: duplicate key 'max_running_requests')"
    )
    path.write_text(json.dumps(doc))
    assert read_document(path).record.facts["max_running_requests"] == 256


# -- the loader's one policy --------------------------------------------------------------------


def test_every_duplicate_is_listed_in_line_order() -> None:
    assert problems("a: 1\nb:\n  a: 2\n  a: 3\na: 4\n") == [
        "line 4: duplicate key 'a' (first on line 3; the later value would silently win)",
        "line 5: duplicate key 'a' (first on line 1; the later value would silently win)",
    ]


def test_a_document_whose_only_problems_are_duplicates_is_still_handed_over() -> None:
    with pytest.raises(YamlError) as caught:
        load_yaml("a: 1\na: 2\nb: 3\n")
    assert caught.value.document == {"a": 2, "b": 3}
    with pytest.raises(YamlError) as caught:
        load_yaml("a: 1\nb: [\n")
    assert caught.value.document is None


def test_duplicates_are_judged_on_the_loaded_key() -> None:
    assert problems("1: a\n1.0: b\n") == [
        "line 2: duplicate key 1.0 (first on line 1; the later value would silently win)"
    ]
    assert problems("{a: 1, a: 2}\n") == [
        "line 1: duplicate key 'a' (first on line 1; the later value would silently win)"
    ]
    assert load_yaml("1: a\n'1': b\nno: c\n") == {1: "a", "1": "b", False: "c"}


def test_merge_keys_are_overridden_by_the_mappings_own_keys() -> None:
    text = "base: &b {x: 1, y: 2}\nunit:\n  <<: *b\n  y: 3\n"
    assert load_yaml(text) == {"base": {"x": 1, "y": 2}, "unit": {"x": 1, "y": 3}}
    assert load_yaml("a: &a {x: 1}\nb: &b {y: 2}\nc: {<<: [*a, *b]}\n")["c"] == {"x": 1, "y": 2}
    assert problems("unit:\n  <<: {x: 1, x: 2}\n") == [
        "line 2: duplicate key 'x' (first on line 2; the later value would silently win)"
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a: [1\nb: 2\n", "line 2, column 2: invalid YAML: expected ',' or ']', but got ':'"),
        ("a: \x07\n", "line 1, column 4: invalid YAML: character #x0007 is not allowed"),
        ("a: !!int abc\n", "line 1, column 4: invalid YAML: 'abc' is not a valid !!int "
         "(invalid literal for int() with base 10: 'abc')"),
        ("a: !!timestamp 2001-13-45\n", "line 1, column 4: invalid YAML: '2001-13-45' is not a "
         "valid !!timestamp (month must be in 1..12)"),
        ("? [a]\n: 1\n", "line 1, column 3: invalid YAML: found unhashable key"),
        ("a: 1\n---\nb: 2\n", "line 2, column 1: invalid YAML: expected a single document in "
         "the stream but found another document"),
        ("[" * 3000, "invalid YAML: nested too deeply"),
        ("a: !!python/object:os.system x\n", "line 1, column 4: invalid YAML: could not "
         "determine a constructor for the tag 'tag:yaml.org,2002:python/object:os.system'"),
    ],
)  # fmt: skip
def test_problems_are_named_at_their_place(text: str, problem: str) -> None:
    assert problems(text) == [problem]


def test_an_empty_document_is_none() -> None:
    assert load_yaml("") is None
    assert load_yaml("# only a comment\n") is None


def test_the_libyaml_loader_is_used_when_pyyaml_has_it() -> None:
    assert yaml.__with_libyaml__, "bootstrap installs PyYAML with libyaml"
    assert issubclass(yamlfile._FAST, yaml.CSafeLoader)


def test_problem_positions() -> None:
    assert str(YamlProblem(None, None, "oops")) == "invalid YAML: oops"
    assert YamlProblem(3, None, "x", "duplicate").where == "line 3"
    assert YamlProblem(3, 7, "x").where == "line 3, column 7"


_yamlish = st.lists(
    st.sampled_from([*"ab1: -[]{},&*!<>?'\"\n\t#|.%@`\\", "\x07", "é", "<<", "!!int ", "  "]),
    max_size=40,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(_yamlish)
def test_any_text_loads_or_is_a_yaml_error(text: str) -> None:
    """No other exception escapes the loader, and a refusal always names a problem."""
    try:
        load_yaml(text)
    except YamlError as exc:
        assert exc.problems and all(str(p) for p in exc.problems)


def test_load_json_refuses_duplicates_and_keeps_json_numbers() -> None:
    assert load_json('{"a": 1e5, "b": {"c": [1, 2]}}') == {"a": 100000.0, "b": {"c": [1, 2]}}
    with pytest.raises(ValueError, match="duplicate key 'c'"):
        load_json('{"a": {"c": 1, "c": 2}}')
