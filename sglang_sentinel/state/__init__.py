"""State: what the sentinel keeps between runs, and the forms a record is written in.

store.py          StateStore      SQLite: startups, pins, cursors, the tracker's resumable state
codec.py          plain           StartupRecord <-> JSON: the one codec of a record as plain data
baseline_file.py  read_document   a pinned baseline as a file to carry between hosts
files.py          StateFiles      the database and its -wal/-shm, looked at without following links
"""

from .baseline_file import (
    BaselineFileError,
    export_document,
    mismatches,
    model_label,
    read_document,
    record_sha256,
    tp_label,
)
from .codec import facts_from_doc, plain
from .store import DB_NAME, StateStore, broken_database

__all__ = [
    "DB_NAME",
    "BaselineFileError",
    "StateStore",
    "broken_database",
    "export_document",
    "facts_from_doc",
    "mismatches",
    "model_label",
    "plain",
    "read_document",
    "record_sha256",
    "tp_label",
]
