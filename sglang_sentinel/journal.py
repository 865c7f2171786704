"""The journal source: a unit's entries, selected as `journalctl -u UNIT` selects them.

Reads only the fields the pipeline needs through `Reader._next()` / `_get()`, which is several
times faster than `get_next()` (that one converts every field of every entry).
"""

from __future__ import annotations

import errno
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from systemd import journal

from .errors import JournalError
from .model import JournalEntry
from .text import clean_message

# sd_journal_wait() results, re-exported so callers need not import systemd.
NOP = journal.NOP
APPEND = journal.APPEND
INVALIDATE = journal.INVALIDATE

_COREDUMP_MESSAGE_ID = "fc2e22bc6ee647b6b90729ab34a250b1"


class JournalSource:
    """Selects the watched units' entries from the local journal, a directory or files."""

    def __init__(
        self,
        units: Sequence[str],
        *,
        directory: Path | None = None,
        files: Sequence[Path] = (),
    ) -> None:
        if not units:
            raise JournalError("no units to watch")
        self.units = tuple(units)
        self._unit_set = frozenset(self.units)
        self.directory = directory
        self.files = tuple(files)
        self._reader: Any = None
        self._last_invocation: dict[str, str] = {}
        self._positioned = False

    # -- opening and positioning ---------------------------------------------------------------

    def open(self) -> None:
        """Open the journal and install the unit matches; raises JournalError with the reason."""
        try:
            if self.directory is not None:
                if not self.directory.is_dir():
                    raise JournalError(f"journal directory {self.directory} does not exist")
                reader = journal.Reader(path=str(self.directory))
            elif self.files:
                missing = [str(f) for f in self.files if not f.is_file()]
                if missing:
                    raise JournalError(f"journal file(s) not found: {', '.join(missing)}")
                reader = journal.Reader(files=[str(f) for f in self.files])
            else:
                reader = journal.Reader(flags=journal.SYSTEM_ONLY)
        except OSError as exc:
            where = self.directory or ", ".join(map(str, self.files)) or "the system journal"
            raise JournalError(f"cannot open {where}: {exc.strerror or exc}") from exc
        # Long server_args lines must arrive whole; 0 lifts libsystemd's 64 KiB truncation.
        reader.data_threshold = 0
        for unit in self.units:
            # journalctl -u: the unit's own lines, PID 1's lines about it, its coredumps.
            reader.add_match(_SYSTEMD_UNIT=unit)
            reader.add_disjunction()
            reader.add_match(_PID="1", UNIT=unit)
            reader.add_disjunction()
            reader.add_match(MESSAGE_ID=_COREDUMP_MESSAGE_ID, _UID="0", COREDUMP_UNIT=unit)
            reader.add_disjunction()
        self._reader = reader

    @property
    def reader(self) -> Any:
        if self._reader is None:
            raise JournalError("journal is not open")
        return self._reader

    def seek_head(self) -> None:
        self.reader.seek_head()

    def seek_realtime(self, seconds: float) -> None:
        self.reader.seek_realtime(seconds)

    def seek_boot_start(self) -> None:
        """Position before the first entry of the current boot (what `journalctl -b` shows)."""
        try:
            self.reader.seek_monotonic(0)
        except (OSError, ValueError):
            self.reader.seek_head()

    def seek_cursor(self, cursor: str) -> bool:
        """Resume after `cursor`. Returns False when its entry is gone and we continue after it."""
        reader = self.reader
        try:
            reader.seek_cursor(cursor)
        except OSError:
            reader.seek_head()
            return False
        # seek_cursor needs a move before test_cursor can answer (systemd#17767, #30331).
        if not reader._next():
            return True  # nothing at or after the cursor yet; we are at the end
        if reader.test_cursor(cursor):
            return True  # on the processed entry itself; reading continues after it
        # Landed on the first entry after a vacuumed/rotated cursor: step back so it is read.
        reader._previous()
        return False

    # -- reading ------------------------------------------------------------------------------

    def entries(self, limit: int | None = None) -> Iterator[JournalEntry]:
        """Yield the entries available now, oldest first; stops at the end of the journal."""
        reader = self.reader
        get = reader._get
        next_ = reader._next
        realtime = reader._get_realtime
        units = self._unit_set
        last_inv = self._last_invocation
        count = 0
        while limit is None or count < limit:
            try:
                if not next_():
                    return
            except OSError as exc:
                if exc.errno == errno.EBADMSG:
                    # A corrupt entry/file: skip it rather than stop following.
                    continue
                raise JournalError(f"reading the journal failed: {exc}") from exc
            count += 1
            try:
                raw = get("MESSAGE")
            except KeyError:
                raw = b""
            try:
                unit = get("_SYSTEMD_UNIT").decode("utf-8", "replace")
            except KeyError:
                unit = ""
            if unit in units:
                try:
                    inv: str | None = get("_SYSTEMD_INVOCATION_ID").decode("ascii", "replace")
                except KeyError:
                    inv = None
                cmdline = None
                if inv is not None and last_inv.get(unit) != inv:
                    last_inv[unit] = inv
                    try:
                        cmdline = get("_CMDLINE").decode("utf-8", "replace")
                    except KeyError:
                        cmdline = None
                yield JournalEntry(
                    unit=unit,
                    message=clean_message(raw),
                    realtime_us=realtime(),
                    invocation_id=inv,
                    cmdline=cmdline,
                )
                continue
            # PID 1 (or systemd-coredump) talking about a watched unit.
            about = _first(get, ("UNIT", "COREDUMP_UNIT"))
            if about is None or about not in units:
                continue
            pid_raw = _first(get, ("_PID",))
            yield JournalEntry(
                unit=about,
                message=clean_message(raw),
                realtime_us=realtime(),
                invocation_id=_first(get, ("INVOCATION_ID",)),
                from_pid1=pid_raw == "1",
                message_id=_first(get, ("MESSAGE_ID",)),
                pid=int(pid_raw) if pid_raw and pid_raw.isdigit() else None,
            )

    def cursor(self) -> str | None:
        """The cursor of the entry last read, or None before the first read."""
        try:
            return str(self.reader._get_cursor())
        except OSError:
            return None

    # -- waiting ------------------------------------------------------------------------------

    def wait(self, timeout: float) -> int:
        """Block until the journal changes or `timeout` seconds pass (NOP/APPEND/INVALIDATE)."""
        return int(self.reader.wait(timeout))

    def fileno(self) -> int:
        return int(self.reader.fileno())

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None


def _first(get: Any, fields: tuple[str, ...]) -> str | None:
    for name in fields:
        try:
            return str(get(name).decode("utf-8", "replace"))
        except KeyError:
            continue
    return None
