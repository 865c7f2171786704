"""The hot path runs all compiled (mypyc) or all pure, and what runs is what was built from."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest

from sglang_sentinel import compiled
from sglang_sentinel.compiled import COMPILED, hot_path, module_names

REPO = Path(__file__).resolve().parents[2]


def test_the_compiled_modules_are_the_package_sources() -> None:
    assert [(REPO / path).is_file() for path in COMPILED] == [True] * len(COMPILED)
    assert module_names()[0] == "sglang_sentinel.startups.tracker"


def test_the_hot_path_is_what_this_run_was_built_for() -> None:
    """make ci sets SENTINEL_HOT_PATH: compiled on .venv's Python, pure on the others. Without
    it, never a mix (a half-built or half-removed build)."""
    want = os.environ.get("SENTINEL_HOT_PATH")
    assert hot_path() == want if want else hot_path() in ("compiled", "pure")


def test_a_compiled_module_is_not_older_than_its_source() -> None:
    """A compiled module shadows its source: after an edit or a merge it must be rebuilt
    (SENTINEL_MYPYC=1 scripts/bootstrap.sh), or the suite tests yesterday's code."""
    stale = []
    for name, path in zip(module_names(), COMPILED, strict=True):
        built = Path(str(importlib.import_module(name).__file__))
        if built.suffix != ".py" and built.stat().st_mtime < (REPO / path).stat().st_mtime:
            stale.append(path)
    assert stale == []


def test_one_module_compiled_and_the_rest_pure_is_mixed(monkeypatch: pytest.MonkeyPatch) -> None:
    """hot_path reads where each module was loaded from: a .so is compiled, a .py pure."""
    so = "/x/m.cpython-311-x86_64-linux-gnu.so"
    for files, want in (
        ([so] + ["/x/m.py"] * (len(COMPILED) - 1), "mixed"),
        (["/x/m.py"] * len(COMPILED), "pure"),
        ([so] * len(COMPILED), "compiled"),
    ):
        for name, file in zip(module_names(), files, strict=True):
            module = type(sys)(name)
            module.__file__ = file
            monkeypatch.setitem(sys.modules, name, module)
        assert compiled.hot_path() == want
