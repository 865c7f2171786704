"""The optional C parts; everything else is in pyproject.toml.

- The C readers (sglang_sentinel/sources/_journalread.c, _fileread.c): built when a compiler, the
  Python headers and libsystemd's (libsystemd-dev) are there, as systemd-python itself needs
  them (_fileread needs only the compiler and the Python headers); without them the build says
  why and the package runs its pure-Python readers.
- The hot path compiled with mypyc (the modules sglang_sentinel/compiled.py lists), only on request:
  SENTINEL_MYPYC=1 in the environment of `pip install`, which then also fetches mypy into the
  build (tools/build_backend.py). Off by default: it costs a minute of build per Python, and an
  editable install would run the compiled copy until rebuilt (scripts/bootstrap.sh rebuilds).

`sentinel --version` names what runs: the journal reader and the hot path (compiled or pure).
"""

from __future__ import annotations

import hashlib
import os
import runpy
from pathlib import Path

from setuptools import Extension, setup


def compiled_hot_path() -> list[Extension]:
    """The mypyc extensions when SENTINEL_MYPYC=1 asks for them, else none (pure Python)."""
    if os.environ.get("SENTINEL_MYPYC", "") != "1":
        return []
    from mypyc.build import mypycify  # asked for: fail loudly without mypy

    paths = list(runpy.run_path("sglang_sentinel/compiled.py")["COMPILED"])
    # What it is built from, for tests/host/test_compiled.py: in a checkout a compiled module
    # shadows its source, and the suite must not test an older build.
    digest = hashlib.sha256(b"".join(Path(p).read_bytes() for p in paths)).hexdigest()
    Path("sglang_sentinel/compiled-sources.sha256").write_text(digest + "\n")
    # One shared library inside the package (not a top-level module beside it).
    return mypycify(paths, opt_level="3", group_name="sglang_sentinel._native")


setup(
    ext_modules=[
        Extension(
            "sglang_sentinel.sources._journalread",
            ["sglang_sentinel/sources/_journalread.c"],
            libraries=["systemd"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(
            "sglang_sentinel.sources._fileread",
            ["sglang_sentinel/sources/_fileread.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        *compiled_hot_path(),
    ]
)
