"""The journal-read floor (part a): read MESSAGE of a unit's entries and nothing else.

Opens the journal exactly as the sentinel's JournalSource does (same `journalctl -u` matches, no
data threshold), so the difference to `sentinel scan` is the sentinel's own work.

    python -m bench.floor JOURNAL_DIR UNIT
"""

from __future__ import annotations

import contextlib
import sys

from systemd import journal

from sglang_sentinel.journal import add_unit_matches


def read_floor(directory: str, unit: str) -> int:
    reader = journal.Reader(path=directory)
    reader.data_threshold = 0
    add_unit_matches(reader, [unit])
    reader.seek_head()
    next_ = reader._next
    get = reader._get
    n = 0
    while next_():
        with contextlib.suppress(KeyError):
            get("MESSAGE")
        n += 1
    reader.close()
    return n


if __name__ == "__main__":
    print(read_floor(sys.argv[1], sys.argv[2]))
