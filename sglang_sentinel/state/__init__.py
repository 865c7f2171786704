"""State: what the sentinel keeps between runs, and the forms a record is written in.

store.py          StateStore      SQLite: startups, pins, cursors, the tracker's resumable state
codec.py          plain           StartupRecord <-> JSON: the one codec of every stored shape (a
                                  record, the tracker's state of a startup under way)
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
from .codec import BuilderDoc, builder_from_json, builder_to_json, facts_from_doc, plain
from .store import DB_NAME, StateStore, broken_database

__all__ = [
    "DB_NAME",
    "BaselineFileError",
    "BuilderDoc",
    "StateStore",
    "broken_database",
    "builder_from_json",
    "builder_to_json",
    "export_document",
    "facts_from_doc",
    "mismatches",
    "model_label",
    "plain",
    "read_document",
    "record_sha256",
    "tp_label",
]
