"""The journal-read floor (part a): read MESSAGE of a unit's entries and nothing else.

One reader with the single `_SYSTEMD_UNIT=UNIT` match and no data threshold: the cheapest way to
read a unit's lines, so the difference to `sentinel scan` is everything the sentinel adds (its
PID 1/coredump lines, invocation ids, rules, tracking, state).

    python -m bench.floor JOURNAL_DIR UNIT
"""

from __future__ import annotations

import sys

from systemd import journal


def read_floor(directory: str, unit: str) -> int:
    reader = journal.Reader(path=directory)
    reader.data_threshold = 0
    reader.add_match(_SYSTEMD_UNIT=unit)
    reader.seek_head()
    next_ = reader._next
    get = reader._get
    n = 0
    while next_():
        # Not contextlib.suppress: entering a context manager per entry costs a fifth of the read.
        try:  # noqa: SIM105
            get("MESSAGE")
        except KeyError:
            pass
        n += 1
    reader.close()
    return n


if __name__ == "__main__":
    print(read_floor(sys.argv[1], sys.argv[2]))
