"""The journal-read floor (part a): read MESSAGE of a unit's entries and nothing else.

Opens the journal exactly as the sentinel's JournalSource does (same `journalctl -u` matches, no
data threshold), so the difference to `sentinel scan` is the sentinel's own work.

    python -m bench.floor JOURNAL_DIR UNIT
"""

from __future__ import annotations

import contextlib
import sys

from systemd import journal

_COREDUMP_MESSAGE_ID = "fc2e22bc6ee647b6b90729ab34a250b1"


def read_floor(directory: str, unit: str) -> int:
    reader = journal.Reader(path=directory)
    reader.data_threshold = 0
    reader.add_match(_SYSTEMD_UNIT=unit)
    reader.add_disjunction()
    reader.add_match(_PID="1", UNIT=unit)
    reader.add_disjunction()
    reader.add_match(MESSAGE_ID=_COREDUMP_MESSAGE_ID, _UID="0", COREDUMP_UNIT=unit)
    reader.add_disjunction()
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
