"""Both sources at once: the journal's lines, then the log files' (pipeline.build_source).

Units and journald-driver containers come from the journal; a container's json-file log under
`docker_root` and the pods' logs under `kubernetes.pod_logs` from the file source. With both,
`CombinedSource` reads the journal's lines, then the files', and its cursor holds both
positions; one poll fd (an epoll instance) wakes for either. A configuration with the journal
only gets the JournalSource as before, its cursor unchanged.
"""

from __future__ import annotations

import json
import select
from collections.abc import Iterator, Mapping
from pathlib import Path

from ..model import PodRef, SourceItem
from .base import Source
from .base import journal_cursor_time as _cursor_time
from .files import FileSource
from .journal import JournalSource


class CombinedSource:
    """The journal's lines, then the log files'; one cursor, one poll fd for both."""

    def __init__(self, journal: JournalSource, files: FileSource) -> None:
        self.journal = journal
        self.files = files
        self._active: Source = journal
        self._journal_cursor: str | None = None  # where the journal was put, until it reads
        self._journal_read = False
        self._epoll: select.epoll | None = None

    @property
    def last_realtime_us(self) -> int | None:
        return self._active.last_realtime_us

    @property
    def units(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.journal.units + self.files.units))

    @property
    def forged_entries(self) -> int:
        return self.journal.forged_entries

    # The counters of both parts (the journal's are the ones about corruption of its files).
    @property
    def corrupt_reads(self) -> int:
        return self.journal.corrupt_reads + self.files.corrupt_reads

    @property
    def truncated_reads(self) -> int:
        return self.journal.truncated_reads + self.files.truncated_reads

    @property
    def unreadable_files(self) -> tuple[tuple[Path, str], ...]:
        return self.journal.unreadable_files

    @property
    def pods(self) -> Mapping[str, PodRef]:
        return self.files.pods

    def open(self, *, follow: bool = True) -> None:
        self.journal.open(follow=follow)
        self.files.open(follow=follow)
        if follow:
            self._epoll = select.epoll()
            self._epoll.register(self.journal.fileno(), self.journal.poll_events())
            self._epoll.register(self.files.fileno(), select.EPOLLIN)

    def close(self) -> None:
        self.journal.close()
        self.files.close()
        if self._epoll is not None:
            self._epoll.close()
            self._epoll = None

    def seek_head(self) -> None:
        self.journal.seek_head()
        self.files.seek_head()
        self._journal_cursor, self._journal_read = None, False

    def seek_realtime(self, seconds: float) -> None:
        self.journal.seek_realtime(seconds)
        self.files.seek_realtime(seconds)
        self._journal_cursor, self._journal_read = None, False

    def seek_boot_start(self, boot_id: str | None = None) -> None:
        self.journal.seek_boot_start(boot_id)
        self.files.seek_boot_start(boot_id)
        self._journal_cursor, self._journal_read = None, False

    def seek_cursor(self, cursor: str) -> bool:
        """A cursor of both parts; a journal cursor alone (saved before files were read) puts
        the journal there and reads the files from their start."""
        self._journal_read = False
        try:
            doc = json.loads(cursor) if cursor.startswith("{") else None
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            self._journal_cursor = cursor
            self.files.seek_head()
            return self.journal.seek_cursor(cursor)
        ok = True
        journal_cursor = doc.get("journal")
        if isinstance(journal_cursor, str):
            self._journal_cursor = journal_cursor
            ok = self.journal.seek_cursor(journal_cursor)
        else:
            self._journal_cursor = None
            self.journal.seek_boot_start()
        files = doc.get("files")
        if files is not None:
            ok = self.files.seek_cursor(json.dumps(files)) and ok
        else:
            self.files.seek_head()
        return ok

    def cursor_time(self, cursor: str) -> float:
        try:
            doc = json.loads(cursor) if cursor.startswith("{") else None
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            return _cursor_time(cursor)
        times = [FileSource.cursor_time(json.dumps(doc.get("files") or {}))]
        if isinstance(doc.get("journal"), str):
            times.append(_cursor_time(doc["journal"]))
        return max(times)

    def lines(self, limit: int | None = None) -> Iterator[SourceItem]:
        count = 0
        self._active = self.journal
        for item in self.journal.lines(limit):
            self._journal_read = True
            count += 1
            yield item
        if limit is not None and count >= limit:
            return
        self._active = self.files
        yield from self.files.lines(None if limit is None else limit - count)

    def realtime_us(self) -> int:
        return self._active.realtime_us()

    def monotonic(self) -> tuple[int, str] | None:
        return self._active.monotonic()

    def cursor(self) -> str | None:
        journal = self.journal.cursor() if self._journal_read else self._journal_cursor
        files = self.files.cursor()
        doc = {"journal": journal, "files": json.loads(files) if files else None}
        return json.dumps(doc, separators=(",", ":"))

    @property
    def partial_pending(self) -> bool:
        return self.journal.partial_pending or self.files.partial_pending

    def fileno(self) -> int:
        assert self._epoll is not None, "opened with follow=False"
        return self._epoll.fileno()

    def poll_events(self) -> int:
        return select.POLLIN

    def timeout_ms(self) -> int | None:
        return self.journal.timeout_ms()

    def acknowledge_changes(self) -> None:
        if self._epoll is not None:
            self._epoll.poll(0)  # level-triggered: readable again until both are taken in
        self.journal.acknowledge_changes()
        self.files.acknowledge_changes()
