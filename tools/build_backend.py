"""The PEP 517 build backend: setuptools', plus what a mypyc build needs when SENTINEL_MYPYC=1.

pip builds in an isolated environment that holds only `[build-system] requires`. mypyc
type-checks the modules it compiles and what they import (setup.py, sglang_sentinel/compiled.py),
so a compiled build also needs mypy and the typed runtime dependencies there; a plain build
(the default) asks for nothing more than setuptools' own.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from setuptools import build_meta
from setuptools.build_meta import (
    build_editable,
    build_sdist,
    build_wheel,
    get_requires_for_build_sdist,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

__all__ = [
    "build_editable",
    "build_sdist",
    "build_wheel",
    "get_requires_for_build_editable",
    "get_requires_for_build_sdist",
    "get_requires_for_build_wheel",
    "prepare_metadata_for_build_editable",
    "prepare_metadata_for_build_wheel",
]

# mypy (mypyc is part of it) and the dependencies whose types the compiled modules see:
# systemd-python and google-re2 ship none (pyproject's mypy overrides).
MYPYC_REQUIRES = [
    "mypy>=1.10",
    "types-PyYAML",
    "pyyaml>=6.0",
    "structlog>=24.1",
    "prometheus-client>=0.20",
]


Settings = dict[str, str | list[str]] | None


@contextlib.contextmanager
def _without_mypyc() -> Iterator[bool]:
    """Whether the build asks for mypyc; setuptools' own hook runs setup.py, before mypy is in
    the build environment, so setup.py sees the request only when it builds."""
    asked = os.environ.get("SENTINEL_MYPYC", "") == "1"
    os.environ["SENTINEL_MYPYC"] = ""
    try:
        yield asked
    finally:
        os.environ["SENTINEL_MYPYC"] = "1" if asked else ""


def get_requires_for_build_wheel(config_settings: Settings = None) -> list[str]:
    """setuptools' requirements, and mypyc's when asked for."""
    with _without_mypyc() as asked:
        own = build_meta.get_requires_for_build_wheel(config_settings)
    return [*own, *(MYPYC_REQUIRES if asked else [])]


def get_requires_for_build_editable(config_settings: Settings = None) -> list[str]:
    """setuptools' requirements, and mypyc's when asked for (`pip install -e`)."""
    with _without_mypyc() as asked:
        own = build_meta.get_requires_for_build_editable(config_settings)
    return [*own, *(MYPYC_REQUIRES if asked else [])]
