"""Which journal reader runs: the C one (`_journalread`, built by `pip install` when a compiler
and libsystemd-dev are there) or python-systemd's Reader, the pure-Python path.

Both read the same fields of every entry (tests/sources/test_journalread.py); the C reader reads MESSAGE
and the invocation id of a run of entries in one walk each (see _journalread.c).
SENTINEL_READER=python in the environment keeps to python-systemd's reader (for comparison).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

_journalread: Any
try:
    _journalread = importlib.import_module("._journalread", __package__)
except ImportError:  # not built: no compiler or libsystemd-dev at install time
    _journalread = None

# read_run's statuses (the C module's; the pure path never sees one).
RUN_LIMIT, RUN_END, RUN_CHECK, RUN_UNREAD = 0, 1, 2, 3


def fast_reader() -> Any:
    """The C Reader class, or None when it is not built or SENTINEL_READER=python."""
    if _journalread is None or os.environ.get("SENTINEL_READER") == "python":
        return None
    return _journalread.Reader


def reader_path() -> str:
    """The reader `sentinel` runs, as `--version` and the build info metric name it."""
    return "c" if fast_reader() is not None else "python"
