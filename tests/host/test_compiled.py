"""The hot path runs all compiled (mypyc) or all pure, and what runs is what was built from."""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
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


def test_the_compiled_modules_were_built_from_these_sources() -> None:
    """A compiled module shadows its source: after an edit or a merge it must be rebuilt
    (SENTINEL_MYPYC=1 scripts/bootstrap.sh), or the suite tests an older build."""
    if hot_path() == "pure":
        return  # the sources themselves run
    built = (REPO / "sglang_sentinel" / "compiled-sources.sha256").read_text().strip()
    now = hashlib.sha256(b"".join((REPO / p).read_bytes() for p in COMPILED)).hexdigest()
    assert built == now, "the compiled hot path is older than its sources: rebuild it"


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
            module.__spec__ = importlib.machinery.ModuleSpec(name, None, origin=file)
            monkeypatch.setitem(sys.modules, name, module)
        assert compiled.hot_path() == want
