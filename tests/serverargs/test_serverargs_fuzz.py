"""Property tests for the server_args parser and redactors: any input, no error, bounded time."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sglang_sentinel.redact import redact_cmdline, redact_value, scrub_text
from sglang_sentinel.serverargs import parse_server_args
from sglang_sentinel.serverargs.parse import ServerArgsResult, is_complete

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "seed-flag-change"
SECRET = "sk-EXAMPLE-not-a-real-key"


def fixture_repr(name: str) -> str:
    text = (FIXTURES / name).read_text()
    line = next(line for line in text.splitlines() if "server_args=" in line)
    return line.split("server_args=", 1)[1]


REPRS = [fixture_repr("startup-1-baseline.log"), fixture_repr("startup-2-flags-added.log")]
FULL = [parse_server_args(text) for text in REPRS]
# Characters that steer the parser: brackets, quotes, escapes, separators, sign and exponent.
SYNTAX = st.sampled_from(list("()[]{}<>'\"\\,:=-.e0 xTN\n"))
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check(result: ServerArgsResult) -> None:
    assert isinstance(result, ServerArgsResult)
    assert isinstance(result.args, dict)
    assert all(isinstance(key, str) for key in result.args)
    assert result.error is None or isinstance(result.error, str)


@FUZZ
@given(st.text(max_size=2000))
def test_any_text_never_raises(text: str) -> None:
    check(parse_server_args(text))
    check(parse_server_args(text, partial_ok=True))
    assert isinstance(is_complete(text), bool)
    assert isinstance(scrub_text(text), str)
    assert isinstance(redact_cmdline(text), tuple)
    redact_value("kv_events_config", text)


@FUZZ
@given(st.lists(st.one_of(SYNTAX, st.text(max_size=3)), max_size=400).map("".join))
def test_syntax_soup_never_raises(text: str) -> None:
    for candidate in (text, "ServerArgs(" + text, "{" + text):
        check(parse_server_args(candidate))
        assert isinstance(is_complete(candidate), bool)


@FUZZ
@given(st.sampled_from([0, 1]), st.data())
def test_truncated_fixture_is_incomplete_and_a_subset(which: int, data: st.DataObject) -> None:
    text = REPRS[which]
    cut = data.draw(st.integers(min_value=0, max_value=len(text) - 1))
    result = parse_server_args(text[:cut], partial_ok=True)
    assert (result.complete, result.error) == (False, None)
    assert not is_complete(text[:cut])
    assert result.args.items() <= FULL[which].args.items()
    assert SECRET not in repr(result)


@FUZZ
@given(st.sampled_from([0, 1]), st.data())
def test_mutated_fixture_never_raises_nor_leaks(which: int, data: st.DataObject) -> None:
    text = REPRS[which]
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        at = data.draw(st.integers(min_value=0, max_value=len(text)))
        insert = data.draw(st.one_of(SYNTAX, st.characters()))
        text = text[:at] + insert + text[at:]
    result = parse_server_args(text)
    check(result)
    assert isinstance(is_complete(text), bool)
    if SECRET in text:
        assert SECRET not in repr(result)


PATHOLOGICAL = {
    "brackets": "[" * 500_000,
    "parens": "(" * 500_000,
    "braces": "{" * 500_000,
    "single_quotes": "'" * 500_000,
    "double_quotes": '"' * 500_000,
    "mixed_quotes": "'\"" * 250_000,
    "angles": "<" * 500_000,
    "nested_call": "ServerArgs(a=" + "F(" * 250_000,
    "nested_dict": "{'a': " * 80_000,
    "open_string": "ServerArgs(a='" + "\\'" * 250_000,
    "open_angle": "ServerArgs(a=<" + "<'>" * 160_000,
    "backslashes": "ServerArgs(a='" + "\\" * 500_000,
    "digits": "ServerArgs(a=" + "9" * 500_000 + ")",
    "exponent": "ServerArgs(a=1" + "e" * 500_000 + ")",
    "idents": "ServerArgs(a=" + "x." * 250_000 + "y)",
}


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_pathological_input_is_fast_and_flat(name: str) -> None:
    """500 kB of hostile input: no RecursionError, well under a second of CPU."""
    text = PATHOLOGICAL[name]
    # CPU time, not wall time: the bound is on the parser's work, which other processes on a
    # loaded CI machine do not change (wall time there went past 1 s for 0.2 s of CPU).
    start = time.process_time()
    result = parse_server_args(text)
    complete = is_complete(text)
    elapsed = time.process_time() - start
    check(result)
    assert isinstance(complete, bool)
    assert elapsed < 1.0, f"{name}: {elapsed:.2f} s"


def test_deep_but_valid_nesting_is_rejected_not_recursed() -> None:
    text = "ServerArgs(ok=1, deep=" + "[" * 10_000 + "]" * 10_000 + ")"
    result = parse_server_args(text)
    assert result.args == {"ok": 1}
    assert result.complete is False
    assert result.error is not None and result.error.startswith("nesting deeper than")
