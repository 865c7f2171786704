"""The journal source: a unit's entries, selected as `journalctl -u UNIT` selects them.

Reads only the fields the pipeline needs through `Reader._next()` / `_get()`, which is several
times faster than `get_next()` (that one converts every field of every entry).
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import structlog
from systemd import journal

from .containers import PartialLines, add_container_matches, split_targets, start_id, target_of
from .errors import JournalError
from .model import JournalEntry
from .text import clean_message

# sd_journal_wait() results, re-exported so callers need not import systemd.
NOP = journal.NOP
APPEND = journal.APPEND
INVALIDATE = journal.INVALIDATE

_COREDUMP_MESSAGE_ID = "fc2e22bc6ee647b6b90729ab34a250b1"
# EBADMSG reads in a row after which the reader counts as stuck on a corrupt spot.
_MAX_BAD_IN_A_ROW = 10_000

log = structlog.get_logger("sglang_sentinel")
BOOT_ID_FILE = Path("/proc/sys/kernel/random/boot_id")


def current_boot_id(path: Path = BOOT_ID_FILE) -> str:
    """This boot's id as the journal's `_BOOT_ID` spells it: 32 hex digits, no dashes."""
    try:
        text = path.read_text(encoding="ascii")
    except OSError as exc:
        raise JournalError(f"cannot read the boot id from {path}: {exc.strerror or exc}") from exc
    return text.strip().replace("-", "")


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
        # Targets: unit names and `docker:NAME` containers (see containers.py).
        self.units = tuple(units)
        plain, containers = split_targets(self.units)
        self._unit_set = frozenset(plain)
        self._containers = frozenset(containers)
        self._partials = PartialLines()
        self._last_start: bytes | None = None  # set by _entry for a container start's line
        self.directory = directory
        self.files = tuple(files)
        self._reader: Any = None
        self._last_invocation: dict[str, str] = {}
        self.last_realtime_us: int | None = None
        # Reads that failed on a corrupt journal file (EBADMSG) and were skipped.
        self.corrupt_reads = 0

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
        plain, containers = split_targets(self.units)
        add_unit_matches(reader, plain)
        add_container_matches(reader, containers)
        # Ask for the fd now: libsystemd sets up its inotify watches lazily on the first
        # get_fd(), and files created before that would go unnoticed (see systemd#40788).
        reader.fileno()
        self._reader = reader

    @property
    def reader(self) -> Any:
        if self._reader is None:
            raise JournalError("journal is not open")
        return self._reader

    def seek_head(self) -> None:
        self._partials.clear()
        self.reader.seek_head()

    def seek_realtime(self, seconds: float) -> None:
        self._partials.clear()
        self.reader.seek_realtime(seconds)

    def seek_boot_start(self, boot_id: str | None = None) -> None:
        """Position before the first entry of boot `boot_id` (default: the current one) and read
        only that boot from then on, as `journalctl -b -u UNIT` does.

        Not `seek_monotonic(0)`: on a persistent journal whose archived files hold earlier boots,
        that lands on an earlier boot's first entry (monotonic times of different boots cannot
        be compared). A `_BOOT_ID` match is exact. A running daemon never leaves its boot, so
        keeping the match costs nothing; the next start resumes from the saved cursor instead.
        """
        self._partials.clear()
        boot = boot_id if boot_id is not None else self.journal_boot(current_boot_id())
        reader = self.reader
        reader.flush_matches()
        add_unit_matches(reader, self.units)
        reader.add_conjunction()
        reader.add_match(_BOOT_ID=boot)
        reader.seek_head()

    def journal_boot(self, kernel_boot: str) -> str:
        """The boot journald calls this one: `kernel_boot` if the journal has an entry of it,
        else the boot of the journal's newest entry (else `kernel_boot`).

        They differ in a container (nspawn, LXC): ProtectProc= and ProtectKernelTunables= give
        the service a fresh /proc whose boot_id is the host kernel's, while the container's
        journald stamps the container's own `_BOOT_ID`. Found by the end-to-end (tests/e2e/).
        Leaves the reader without matches; the caller installs its own.
        """
        reader = self.reader
        reader.flush_matches()
        try:
            reader.add_match(_BOOT_ID=kernel_boot)
            reader.seek_head()
            if reader._next():
                return kernel_boot
            reader.flush_matches()
            reader.seek_tail()
            if reader._previous():
                _usec, boot = reader._get_monotonic()  # the raw 16 bytes of _BOOT_ID
                return bytes(boot).hex()
            return kernel_boot
        finally:
            reader.flush_matches()

    def seek_cursor(self, cursor: str) -> bool:
        """Resume after `cursor`. Returns False when its entry is gone and we continue after it."""
        reader = self.reader
        self._partials.clear()
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
        current: JournalEntry | None = None
        for item in self.lines(limit):
            if isinstance(item, JournalEntry):
                current = item
                yield item
            else:
                assert current is not None  # lines() sends bytes only after a service entry
                yield JournalEntry(
                    unit=current.unit,
                    message=clean_message(item),
                    realtime_us=self.realtime_us(),
                    invocation_id=current.invocation_id,
                )

    def lines(self, limit: int | None = None) -> Iterator[JournalEntry | bytes]:
        """Like `entries()`, but a service line of the same invocation as the service line just
        before it comes as its raw MESSAGE bytes: unit and invocation are the previous entry's,
        its time is `realtime_us()` while the generator is suspended on it.

        That is nearly every line of a busy unit, and a JournalEntry plus the reads of
        _SYSTEMD_UNIT and the realtime cost as much again as reading MESSAGE; most lines match
        nothing and need none of it. `last_realtime_us` is the time of the last entry read.
        """
        reader = self.reader
        get = reader._get
        next_ = reader._next
        # The raw _SYSTEMD_INVOCATION_ID of the last service entry yielded; an invocation id
        # belongs to one unit, so an equal one means the same unit and invocation.
        context: bytes | None = None
        # The raw CONTAINER_LOG_EPOCH of the last container entry yielded: one per start of
        # one container, so it does for containers what the invocation id does for units.
        start: bytes | None = None
        count = 0
        bad_in_a_row = 0
        try:
            while limit is None or count < limit:
                try:
                    if not next_():
                        return
                    bad_in_a_row = 0
                except OSError as exc:
                    if exc.errno != errno.EBADMSG:
                        raise JournalError(f"reading the journal failed: {exc}") from exc
                    # A corrupt entry or file: skip it rather than stop following, and say so.
                    self.corrupt_reads += 1
                    bad_in_a_row += 1
                    if self.corrupt_reads == 1:
                        log.warning("journal_file_corrupt", error=str(exc), action="skipped")
                    if bad_in_a_row >= _MAX_BAD_IN_A_ROW:
                        # The reader does not move past it: reading on would loop forever.
                        raise JournalError(
                            f"reading the journal failed: {bad_in_a_row} corrupt reads in a row "
                            "without progress (run `journalctl --verify`)"
                        ) from exc
                    continue
                count += 1
                try:
                    raw = get("MESSAGE")
                except KeyError:
                    raw = b""
                try:
                    inv_raw: bytes | None = get("_SYSTEMD_INVOCATION_ID")
                except KeyError:
                    inv_raw = None
                if inv_raw is not None and inv_raw == context:
                    yield raw
                    continue
                if start is not None and self._continues_start(start):
                    yield raw  # the next whole line of the container start just yielded
                    continue
                entry, own = self._entry(raw, inv_raw)
                context = inv_raw if own else None
                start = self._last_start
                if entry is not None:
                    yield entry
        finally:
            if count:
                # Still on the last entry read (sd_journal_next() at the end does not move).
                with contextlib.suppress(OSError):
                    self.last_realtime_us = self.realtime_us()

    def _entry(self, raw: bytes, inv_raw: bytes | None) -> tuple[JournalEntry | None, bool]:
        """The full record of one entry, and whether it is a watched unit's own line."""
        get = self.reader._get
        self._last_start = None
        units = self._unit_set
        try:
            unit = get("_SYSTEMD_UNIT").decode("utf-8", "replace")
        except KeyError:
            unit = ""
        if unit in units:
            inv = inv_raw.decode("ascii", "replace") if inv_raw is not None else None
            cmdline = None
            if inv is not None and self._last_invocation.get(unit) != inv:
                self._last_invocation[unit] = inv
                try:
                    cmdline = get("_CMDLINE").decode("utf-8", "replace")
                except KeyError:
                    cmdline = None
            entry = JournalEntry(
                unit=unit,
                message=clean_message(raw),
                realtime_us=self.realtime_us(),
                invocation_id=inv,
                cmdline=cmdline,
            )
            return entry, True
        if self._containers:
            name = _first(get, ("CONTAINER_NAME",))
            if name is not None and name in self._containers:
                return self._container_entry(name, raw), False
        # PID 1 (or systemd-coredump) talking about a watched unit.
        about = _first(get, ("UNIT", "COREDUMP_UNIT"))
        if about is None or about not in units:
            return None, False
        pid_raw = _first(get, ("_PID",))
        entry = JournalEntry(
            unit=about,
            message=clean_message(raw),
            realtime_us=self.realtime_us(),
            invocation_id=_first(get, ("INVOCATION_ID",)),
            from_pid1=pid_raw == "1",
            message_id=_first(get, ("MESSAGE_ID",)),
            pid=int(pid_raw) if pid_raw and pid_raw.isdigit() else None,
        )
        return entry, False

    def _container_entry(self, name: str, raw: bytes) -> JournalEntry | None:
        """A watched container's line (Docker's journald driver), its pieces joined first.

        Never "own": dockerd's invocation id is on every container's lines, so the raw-line
        fast path of `lines()` must not take the next entry for the same start.
        """
        get = self.reader._get
        target = target_of(name)
        line = self._partials.add(
            target,
            raw,
            partial=_first(get, ("CONTAINER_PARTIAL_MESSAGE",)) == "true",
            partial_id=_first(get, ("CONTAINER_PARTIAL_ID",)),
        )
        if line is None:
            return None  # a piece of a longer line; the entry with its last piece yields it
        epoch = _first(get, ("CONTAINER_LOG_EPOCH",))
        self._last_start = epoch.encode() if epoch else None
        return JournalEntry(
            unit=target,
            message=clean_message(line),
            realtime_us=self.realtime_us(),
            invocation_id=start_id(_first(get, ("CONTAINER_ID_FULL",)) or "", epoch),
        )

    def _continues_start(self, start: bytes) -> bool:
        """The entry is a whole line (no piece) of the container start whose epoch is `start`."""
        if self._partials.pending:
            return False  # this entry may end a split line: join it the slow way
        get = self.reader._get
        try:
            if get("CONTAINER_LOG_EPOCH") != start:
                return False
        except KeyError:
            return False
        for name in ("CONTAINER_PARTIAL_ID", "CONTAINER_PARTIAL_MESSAGE"):
            try:
                get(name)
            except KeyError:
                continue
            return False
        return True

    @property
    def partial_pending(self) -> bool:
        """Pieces of a container line read but not yielded yet (the cursor is past them)."""
        return self._partials.pending

    def realtime_us(self) -> int:
        """The realtime timestamp (µs) of the entry the reader is on."""
        return int(self.reader._get_realtime())

    def monotonic(self) -> tuple[int, str] | None:
        """The monotonic timestamp (µs since boot) and boot id of the entry the reader is on."""
        try:
            usec, boot = self.reader._get_monotonic()
        except OSError:
            return None
        return int(usec), bytes(boot).hex()

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


def add_unit_matches(reader: Any, units: Sequence[str]) -> None:
    """Select what `journalctl -u UNIT` selects: the unit's own lines, PID 1's lines about it,
    and its coredumps (systemd's add_matches_for_unit)."""
    for unit in units:
        reader.add_match(_SYSTEMD_UNIT=unit)
        reader.add_disjunction()
        reader.add_match(_PID="1", UNIT=unit)
        reader.add_disjunction()
        reader.add_match(MESSAGE_ID=_COREDUMP_MESSAGE_ID, _UID="0", COREDUMP_UNIT=unit)
        reader.add_disjunction()


def _first(get: Any, fields: tuple[str, ...]) -> str | None:
    for name in fields:
        try:
            return str(get(name).decode("utf-8", "replace"))
        except KeyError:
            continue
    return None
