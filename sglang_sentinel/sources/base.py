"""What the pipeline and the daemon need of a source: the journal's, a log-file layout's, both.

`JournalSource` (journal.py), `FileSource` (files.py) and `CombinedSource` (combined.py)
have this shape; the pipeline and daemon are written against it, so a container's json-file log
or a pod's CRI log goes through the same rules, startups, comparison, state and outputs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Protocol

from ..model import PodRef, SourceItem


class Source(Protocol):
    """A reader of log lines with a position that can be saved (a cursor) and resumed."""

    @property
    def corrupt_reads(self) -> int: ...

    @property
    def truncated_reads(self) -> int: ...

    @property
    def last_realtime_us(self) -> int | None: ...

    @property
    def units(self) -> tuple[str, ...]:
        """The targets it reads (units, docker:NAME, k8s:...)."""
        ...

    @property
    def forged_entries(self) -> int: ...

    @property
    def unreadable_files(self) -> tuple[tuple[Path, str], ...]: ...

    @property
    def pods(self) -> Mapping[str, PodRef]:
        """Start id -> the pod it runs in (name and uid), for the pod log streams there now
        (empty for the journal): the current pod of a `k8s:` target."""
        ...

    def open(self, *, follow: bool = True) -> None: ...

    def close(self) -> None: ...

    def seek_head(self) -> None: ...

    def seek_realtime(self, seconds: float) -> None: ...

    def seek_boot_start(self, boot_id: str | None = None) -> None: ...

    def seek_cursor(self, cursor: str) -> bool: ...

    def lines(self, limit: int | None = None) -> Iterator[SourceItem]: ...

    def realtime_us(self) -> int: ...

    def monotonic(self) -> tuple[int, str] | None: ...

    def cursor(self) -> str | None: ...

    @property
    def partial_pending(self) -> bool: ...

    def fileno(self) -> int: ...

    def poll_events(self) -> int: ...

    def timeout_ms(self) -> int | None: ...

    def acknowledge_changes(self) -> None: ...


def journal_cursor_time(cursor: str) -> float:
    """The realtime stamp a journal cursor carries (`t=` in hex microseconds); 0 if absent."""
    for part in cursor.split(";"):
        if part.startswith("t="):
            try:
                return int(part[2:], 16) / 1e6
            except ValueError:
                return 0.0
    return 0.0
