"""Which readers run: the C ones (`_journalread`, built by `pip install` when a compiler and
libsystemd-dev are there; `_fileread`, when a compiler is) or the pure-Python paths.

Both journal readers read the same fields of every entry (tests/sources/test_journalread.py);
the C reader reads MESSAGE and the invocation id of a run of entries in one walk each (see
_journalread.c). Both file readers hand out the same lines (tests/sources/test_fileread_exact.py);
the C one cuts a run of common lines apart in one call (see _fileread.c).
SENTINEL_READER=python in the environment keeps to the pure-Python paths (for comparison).
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

_fileread: Any
try:
    _fileread = importlib.import_module("._fileread", __package__)
except ImportError:  # not built: no compiler at install time
    _fileread = None

# read_run's statuses (the C module's; the pure path never sees one).
RUN_LIMIT, RUN_END, RUN_CHECK, RUN_UNREAD = 0, 1, 2, 3


def fast_reader() -> Any:
    """The C Reader class, or None when it is not built or SENTINEL_READER=python."""
    if _journalread is None or os.environ.get("SENTINEL_READER") == "python":
        return None
    return _journalread.Reader


def reader_path() -> str:
    """The journal reader `sentinel` runs, as `--version` and the build info metric name it."""
    return "c" if fast_reader() is not None else "python"


def file_reader_path() -> str:
    """The reader of Docker's and the kubelet's log files `sentinel` runs ("c" or "python"), as
    `--version` and the build info metric name it."""
    return "c" if fast_file_run() is not None else "python"


def fast_file_run() -> Any:
    """The C file reader's `run`, or None when it is not built or SENTINEL_READER=python."""
    if _fileread is None or os.environ.get("SENTINEL_READER") == "python":
        return None
    return _fileread.run
