"""The journal-read floor (part a): read MESSAGE of a unit's entries and nothing else.

One reader with the single `_SYSTEMD_UNIT=UNIT` match and no data threshold: the cheapest way to
read a unit's lines, so the difference to `sentinel scan` is everything the sentinel adds (its
PID 1/coredump lines, invocation ids, rules, tracking, state). With `--invocation` it also reads
each entry's _SYSTEMD_INVOCATION_ID, the least an exact scan must read of a line besides MESSAGE
to put it in its startup (`bench.lowerbound`).

    python -m bench.floor JOURNAL_DIR UNIT [--invocation]
"""

from __future__ import annotations

import sys

from systemd import journal


def read_floor(directory: str, unit: str) -> int:
    reader = _open(directory, unit)
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


def read_with_invocations(directory: str, unit: str) -> tuple[int, int]:
    """Entries read, and how often the invocation id changed from one entry to the next."""
    reader = _open(directory, unit)
    next_ = reader._next
    get = reader._get
    n = changes = 0
    last = None
    while next_():
        try:  # noqa: SIM105
            get("MESSAGE")
        except KeyError:
            pass
        try:
            inv = get("_SYSTEMD_INVOCATION_ID")
        except KeyError:
            inv = None
        if inv != last:
            last = inv
            changes += 1
        n += 1
    reader.close()
    return n, changes


def _open(directory: str, unit: str) -> journal.Reader:
    reader = journal.Reader(path=directory)
    reader.data_threshold = 0
    reader.add_match(_SYSTEMD_UNIT=unit)
    reader.seek_head()
    return reader


if __name__ == "__main__":
    if sys.argv[3:] == ["--invocation"]:
        print(*read_with_invocations(sys.argv[1], sys.argv[2]))
    else:
        print(read_floor(sys.argv[1], sys.argv[2]))
