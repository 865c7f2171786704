"""The hot path compiled with mypyc from the same source: which modules, and whether they run so.

`SENTINEL_MYPYC=1 pip install .` (setup.py) compiles the modules below into C extensions beside
their sources; a plain install runs them as Python. Both run the same code, and CI runs the suite
both ways (.venv's Python compiled, the other Pythons pure). setup.py reads COMPILED from this
file before the package's dependencies are installed: it imports nothing of the package.
"""

from __future__ import annotations

import importlib
from typing import Final

# Where it pays (a 1M-entry scan's profile: the tracker's feed loop, decode statistics, the
# journal's line loop). Compiling rules/, model.py and text.py as well measured no faster.
COMPILED: Final = (
    "sglang_sentinel/startups/tracker.py",
    "sglang_sentinel/startups/decode_samples.py",
    "sglang_sentinel/sources/journal.py",
)


def module_names() -> list[str]:
    """The compiled modules' import names."""
    return [path.removesuffix(".py").replace("/", ".") for path in COMPILED]


def origin(name: str) -> str:
    """The file module `name` was loaded from, .py or a C extension. (A mypyc module names its
    own path with the package's directory twice; the suffix is right.)"""
    spec = importlib.import_module(name).__spec__
    return str(spec.origin) if spec is not None else ""


def hot_path() -> str:
    """`compiled` when every module above runs compiled, `pure` when none does, else `mixed`."""
    compiled = [origin(name).endswith((".so", ".pyd")) for name in module_names()]
    if all(compiled):
        return "compiled"
    return "mixed" if any(compiled) else "pure"
