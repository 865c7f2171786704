"""`plain`'s shortcut for a list of scalars (the bulk of a record: decode samples) gives exactly
what the element-by-element conversion it skips gave, for any nesting of dicts, lists, tuples and
scalars (subclasses of them and non-finite floats included), with and without `finite`."""

from __future__ import annotations

import collections
import enum
import json
import math
import types
from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_sentinel.state import codec, plain
from sglang_sentinel.state.codec import json_key


def old_plain(value: Any, *, finite: bool = False) -> Any:
    """`plain` before the shortcut, verbatim."""
    if isinstance(value, Mapping):
        return {json_key(k): old_plain(v, finite=finite) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [old_plain(v, finite=finite) for v in value]
    if finite and isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


class _Level(enum.IntEnum):
    LOW = 1


class _Text(str):
    pass


class _List(list[Any]):
    pass


_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # nan and inf included
    st.text(max_size=5),
    st.just(_Level.LOW),
    st.builds(_Text, st.text(max_size=3)),
)
_value = st.recursive(
    _scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6),
        st.lists(inner, max_size=6).map(tuple),
        st.dictionaries(
            st.one_of(st.text(max_size=4), st.integers(), st.none()), inner, max_size=4
        ),
        # Subclasses and other mappings take the general tests after the exact-type ones.
        st.lists(inner, max_size=3).map(_List),
        st.dictionaries(st.text(max_size=3), inner, max_size=3).map(collections.OrderedDict),
        st.dictionaries(st.text(max_size=3), inner, max_size=3).map(types.MappingProxyType),
    ),
    max_leaves=30,
)


def _typed(value: Any) -> Any:
    """The value with every element's exact type spelled out (== alone says 1 == 1.0 == True)."""
    if isinstance(value, dict):
        return ("dict", [(type(k).__name__, k, _typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [_typed(v) for v in value])
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    return (type(value).__name__, repr(value))


@settings(max_examples=400, deadline=None)
@given(_value, st.booleans())
def test_plain_equals_the_element_by_element_conversion(value: Any, finite: bool) -> None:
    new, old = plain(value, finite=finite), old_plain(value, finite=finite)
    assert _typed(new) == _typed(old)
    if not finite:
        return
    assert json.dumps(new, sort_keys=True, allow_nan=False) == json.dumps(
        old, sort_keys=True, allow_nan=False
    )


def test_a_list_of_scalars_is_a_new_list() -> None:
    """The caller may change what plain returned without changing the record."""
    sample = [1.5, 0.0, 1000.0, 8.0, 512.0]
    out = plain({"bs8/ctx512": [sample]})
    assert out == {"bs8/ctx512": [sample]}
    assert out["bs8/ctx512"][0] is not sample
    assert plain((1, "a", None)) == [1, "a", None]


def test_plain_asks_the_mapping_abc_only_about_values_of_no_exact_type(monkeypatch: Any) -> None:
    """A decode summary is thousands of lists and a live daemon's commit walks it several times
    a second: the ABC's isinstance is the slow test, so exact dicts, lists, tuples and scalars
    are told by their type and only a subclass (or another mapping) is asked about."""
    asked: list[type] = []

    class Meta(type):
        def __instancecheck__(cls, value: object) -> bool:
            asked.append(type(value))
            return isinstance(value, Mapping)

    class Counting(metaclass=Meta):
        pass

    monkeypatch.setattr(codec, "Mapping", Counting)
    summary = {
        "buckets": {"bs8/ctx512": [[1.5, 0.0, 1000.0, 8.0, 512.0]] * 3},
        "t": (1, [2], None, "s", True),
        "counts": {"clean": 3, "x": 2.5},
        "sub": _Text("a"),
    }
    assert plain(summary) == {
        "buckets": {"bs8/ctx512": [[1.5, 0.0, 1000.0, 8.0, 512.0]] * 3},
        "t": [1, [2], None, "s", True],
        "counts": {"clean": 3, "x": 2.5},
        "sub": "a",
    }
    assert asked == [_Text]
