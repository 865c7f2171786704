"""The journal source: a unit's entries, selected as `journalctl -u UNIT` selects them.

Reads only the fields the pipeline needs through `Reader._next()` / `_get()`, which is several
times faster than `get_next()` (that one converts every field of every entry).

`journalctl -u` is a disjunction: the unit's own lines, PID 1's lines about it, its coredumps.
libsystemd pays for a disjunction on every entry (about 15 % of the read), so the source reads
the unit's lines with a single match and the rare PID 1/coredump lines with a second reader, and
merges the two in journal order: a manager line is handed out right after the last unit line
before it (found by a third reader, `_probe`, positioned at the manager line). The order is
libsystemd's own, and the position a `cursor()` names means what it did with one reader:
everything up to that entry was handed out, nothing after it.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Generator, Mapping, Sequence
from pathlib import Path
from typing import Any

from systemd import journal

from ..errors import JournalError
from ..logs import Logger
from ..model import DOCKER_UNITS, JournalEntry, PodRef, SourceItem
from ..text import clean_message
from . import sigbus
from .containers import (
    PartialLines,
    add_container_matches,
    engine_mismatch,
    split_targets,
    start_id,
    target_of,
)
from .readers import RUN_CHECK, RUN_END, RUN_UNREAD, fast_reader

# sd_journal_wait() results, re-exported so callers need not import systemd.
NOP = journal.NOP
APPEND = journal.APPEND
INVALIDATE = journal.INVALIDATE

_COREDUMP_MESSAGE_ID = "fc2e22bc6ee647b6b90729ab34a250b1"
# EBADMSG reads in a row after which the reader counts as stuck on a corrupt spot.
_MAX_BAD_IN_A_ROW = 10_000
# Entries one read_run call reads at most when the caller lets the reader read ahead (a scan).
_READ_AHEAD = 256

log = Logger("sglang_sentinel")
BOOT_ID_FILE = Path("/proc/sys/kernel/random/boot_id")


def _watch(reader: Any) -> None:
    """Ask for the reader's fd now: libsystemd sets up its inotify watches lazily on the first
    get_fd(), and files created before that would go unnoticed (see systemd#40788)."""
    try:
        reader.fileno()
    except OSError as exc:
        if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOSPC):
            raise JournalError(
                f"cannot watch the journal for new entries: {exc.strerror or exc} (inotify "
                "instances or watches used up: raise fs.inotify.max_user_instances / "
                "max_user_watches, or stop what holds them)"
            ) from exc
        raise JournalError(f"cannot watch the journal for new entries: {exc}") from exc


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
        open_reader: Callable[[], Any] | None = None,
        docker_units: Sequence[str] = DOCKER_UNITS,
    ) -> None:
        if not units:
            raise JournalError("no units to watch")
        # Targets: unit names and `docker:NAME` containers (see containers.py).
        self.units = tuple(units)
        plain, containers = split_targets(self.units)
        self._unit_set = frozenset(plain)
        self._containers = frozenset(containers)
        self._partials = PartialLines()
        # The units dockerd runs as: a container line from anywhere else is not the engine's.
        self.docker_units = tuple(docker_units)
        # Set by _entry for a container start's line: (its CONTAINER_LOG_EPOCH, the sender's
        # _SYSTEMD_INVOCATION_ID and _PID), all raw.
        self._last_start: tuple[bytes, bytes, bytes] | None = None
        # Entries naming a watched container that dockerd did not send, ignored.
        self.forged_entries = 0
        self.pods: Mapping[str, PodRef] = {}  # the journal has no pods (base.Source.pods)
        self.directory = directory
        self.files = tuple(files)
        # How one libsystemd reader is opened; a seam for tests that need a reader misbehave.
        self._open_reader = open_reader
        self._reader: Any = None  # the units' own lines (one match per unit)
        self._side: Any = None  # PID 1's lines about the units and their coredumps
        self._probe: Any = None  # like _reader; only positioned, to find where a side line goes
        self._last_invocation: dict[str, str] = {}
        self.last_realtime_us: int | None = None
        # Reads that failed on a corrupt journal file (EBADMSG) and were skipped.
        self.corrupt_reads = 0
        # Files in the journal directory libsystemd cannot open (bad header): it skips them
        # without a word when it opens the directory, so open() looks at each and says so.
        self.unreadable_files: tuple[tuple[Path, str], ...] = ()
        # SIGBUS faults survived: a file truncated under the reader's mmap (see sigbus.py).
        self.truncated_reads = 0
        self._faults_seen = sigbus.faults()
        self._reset_merge()

    def _reset_merge(self) -> None:
        # The side line read but not handed out yet, its cursor, and the unit line it follows
        # ((realtime, cursor), or None: no unit line is before it).
        self._pending: JournalEntry | None = None
        self._pending_cursor = ""
        self._pending_after: tuple[int, str] | None = None
        # The cursor of the last line handed out when it was a side line ("": a unit line,
        # which _reader is on).
        self._side_cursor = ""
        self._side_mono: tuple[int, str] | None = None  # the monotonic time of that side line
        self._pending_mono: tuple[int, str] | None = None
        # _reader is on a line it has not handed out yet (after a seek past a gone cursor).
        self._held = False
        # _reader found no unit line after a seek: it is on none, and none is to come now.
        self._unit_ended = False
        self._realtime = 0  # of the unit line _reader is on
        # _reader is on an entry read_run stopped at without reading it (see lines()).
        self._unread = False
        # Entries _reader has read past the line handed out last (a read-ahead run's rest).
        self._behind = 0

    # -- opening and positioning ---------------------------------------------------------------

    def open(self, *, follow: bool = True) -> None:
        """Open the journal and install the unit matches; raises JournalError with the reason.

        `follow`: the readers will wait for and see what is written after this (the daemon),
        which takes an inotify instance each (a per-user limit, fs.inotify.max_user_instances,
        128 by default); a one-shot read (scan, check, report) takes none.
        """
        if not sigbus.install():
            log.warning("sigbus_handler_unavailable", effect="a truncated journal file kills")
        # The unit reader reads nearly every entry: the C reader when it is built (readers.py).
        readers = [self._open_one(fast=True), self._open_one(), self._open_one()]
        if not self.files:  # Reader(files=...) refuses a bad file itself (JournalError)
            self.unreadable_files = unreadable_files(self.directory)
            for path, reason in self.unreadable_files:
                log.warning(
                    "journal_file_unreadable",
                    file=str(path),
                    error=reason,
                    action="skipped by libsystemd; run `journalctl --verify --file` on it",
                )
        for reader in readers:
            # Long server_args lines must arrive whole; 0 lifts libsystemd's 64 KiB truncation.
            reader.data_threshold = 0
            if follow:
                _watch(reader)
        self._reader, self._side, self._probe = readers
        if not split_targets(self.units)[0]:
            self._side.close()  # no unit: no PID 1 or coredump lines about one
            self._side = None
        self._install_matches(None)
        self._reset_merge()

    def _install_matches(self, boot: str | None) -> None:
        """The readers' matches; with `boot`, only that boot's entries (a conjunction)."""
        plain, containers = split_targets(self.units)
        for reader in (self._reader, self._probe):
            reader.flush_matches()
            add_unit_matches(reader, plain)
            if containers:
                # Containers are matched on another field: a disjunction, only when there are some.
                reader.add_disjunction()
                add_container_matches(reader, containers)
            if boot is not None:
                reader.add_conjunction()
                reader.add_match(_BOOT_ID=boot)
        if self._side is not None:
            self._side.flush_matches()
            add_manager_matches(self._side, plain)
            if boot is not None:
                self._side.add_conjunction()
                self._side.add_match(_BOOT_ID=boot)

    def _open_one(self, *, fast: bool = False) -> Any:
        if self._open_reader is not None:
            return self._open_reader()
        reader = fast_reader() if fast else None
        opener = reader if reader is not None else journal.Reader
        try:
            if self.directory is not None:
                if not self.directory.is_dir():
                    raise JournalError(f"journal directory {self.directory} does not exist")
                return opener(path=str(self.directory))
            if self.files:
                missing = [str(f) for f in self.files if not f.is_file()]
                if missing:
                    raise JournalError(f"journal file(s) not found: {', '.join(missing)}")
                return opener(files=[str(f) for f in self.files])
            return opener(flags=journal.SYSTEM_ONLY)
        except OSError as exc:
            where = self.directory or ", ".join(map(str, self.files)) or "the system journal"
            raise JournalError(f"cannot open {where}: {exc.strerror or exc}") from exc

    @property
    def reader(self) -> Any:
        if self._reader is None:
            raise JournalError("journal is not open")
        return self._reader

    def _readers(self) -> tuple[Any, ...]:
        self._reset_merge()
        self._partials.clear()
        return (self.reader,) if self._side is None else (self.reader, self._side)

    def _hold_first(self) -> None:
        # After a seek the unit reader is on no line; put it on its first one (held, not handed
        # out), so that where a side line goes is a question about two lines.
        reader = self.reader
        with contextlib.suppress(OSError):
            if reader._next():
                self._held = True
                self._realtime = int(reader._get_realtime())
            else:
                self._unit_ended = True

    def seek_head(self) -> None:
        for reader in self._readers():
            reader.seek_head()
        self._hold_first()

    def seek_realtime(self, seconds: float) -> None:
        for reader in self._readers():
            reader.seek_realtime(seconds)
        self._hold_first()

    def seek_boot_start(self, boot_id: str | None = None) -> None:
        """Position before the first entry of boot `boot_id` (default: the current one) and read
        only that boot from then on, as `journalctl -b -u UNIT` does.

        Not `seek_monotonic(0)`: on a persistent journal whose archived files hold earlier boots,
        that lands on an earlier boot's first entry (monotonic times of different boots cannot
        be compared). A `_BOOT_ID` match is exact. A running daemon never leaves its boot, so
        keeping the match costs nothing; the next start resumes from the saved cursor instead.
        """
        boot = boot_id if boot_id is not None else self.journal_boot(current_boot_id())
        readers = self._readers()
        self._install_matches(boot)
        for reader in readers:
            reader.seek_head()
        self._hold_first()

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
        readers = self._readers()
        unit, side = readers[0], (readers[1] if len(readers) > 1 else None)
        try:
            for reader in readers:
                reader.seek_cursor(cursor)
        except OSError:
            self.seek_head()
            return False
        # seek_cursor needs a move before test_cursor can answer (systemd#17767, #30331).
        # Each reader lands on its first entry at or after the cursor's position: the entry
        # itself (handed out before: reading continues after it) or the next one, kept.
        found = False
        if unit._next():
            if unit.test_cursor(cursor):
                found = True
            else:
                self._held = True
                self._realtime = int(unit._get_realtime())
        else:
            self._unit_ended = True
        if side is not None and side._next():
            if side.test_cursor(cursor):
                found = True
            else:
                self._take_side()
        # Nothing at or after the cursor yet: we are at the end, after it.
        return found or (not self._held and self._pending is None)

    # -- reading ------------------------------------------------------------------------------

    def lines(
        self, limit: int | None = None, *, read_ahead: bool = False
    ) -> Generator[SourceItem, None, None]:
        """The entries available now, oldest first, until the end of the journal; but a service
        line of the same invocation as the service line just before it comes as its raw MESSAGE
        bytes: unit and invocation are the previous entry's, its time is `realtime_us()` while
        the generator is suspended on it.

        That is nearly every line of a busy unit, and a JournalEntry plus the read of
        _SYSTEMD_UNIT cost as much again as reading MESSAGE; most lines match nothing and need
        none of it. `last_realtime_us` is the time of the last entry read.

        With the C reader, the lines of one invocation come from `read_run`: one walk of each
        entry's fields, one entry per call, or with `read_ahead` (a one-shot read) up to
        _READ_AHEAD per call; `cursor()` and `monotonic()` still answer for the line handed out
        last, and a generator closed early leaves the reader there.
        """
        reader = self.reader
        get = reader._get
        next_ = reader._next
        realtime = reader._get_realtime
        test_cursor = reader.test_cursor
        read_run = getattr(reader, "read_run", None)
        ahead = _READ_AHEAD if read_ahead else 1
        self._refresh()
        # The last unit line there is now: this round reads up to it, so that a side line
        # written meanwhile is never handed out after a unit line written after it.
        end_at, end_cursor = self._last_unit_line(None) or (-1, "")
        count = 0
        bad_in_a_row = 0
        now = -1
        try:
            while limit is None or count < limit:
                # Side lines that come before the unit reader's next line.
                if self._pending is None:
                    self._next_side()
                if self._pending is not None and self._side_due():
                    side_line = self._pending
                    self._side_cursor = self._pending_cursor
                    self._side_mono = self._pending_mono
                    self._pending = None
                    now = side_line.realtime_us
                    count += 1
                    yield side_line
                    continue
                if end_at == -2:
                    return  # the unit reader is at its end or at the horizon
                # Unit lines, up to the unit line the pending side line follows.
                stop_at, stop_cursor = (
                    self._pending_after if self._pending is not None else None
                ) or (-1, "")
                # The raw _SYSTEMD_INVOCATION_ID of the last service line yielded; an invocation
                # id belongs to one unit, so an equal one means the same unit and invocation.
                context: bytes | None = None
                # The raw CONTAINER_LOG_EPOCH of the last container entry yielded (one per start
                # of one container, so it does for containers what the invocation id does for
                # units), with the raw _SYSTEMD_INVOCATION_ID and _PID of the dockerd that sent it.
                start: tuple[bytes, bytes, bytes] | None = None
                first = True
                while limit is None or count < limit:
                    if (
                        read_run is not None
                        and context is not None
                        and not (self._unread or self._held)
                    ):
                        budget = ahead if limit is None else min(ahead, limit - count)
                        msgs, rts, status = read_run(context, budget, stop_at, end_at)
                        if msgs:
                            bad_in_a_row = 0
                            count += len(msgs)
                            # The reader is on the run's last entry, or on the one after it
                            # that read_run stopped at.
                            self._behind = len(msgs) + (status == RUN_UNREAD)
                            for raw, now in zip(msgs, rts, strict=True):
                                self._behind -= 1
                                self._realtime = now
                                yield raw
                            self._behind = 0
                        if status == RUN_CHECK:
                            if now == stop_at and test_cursor(stop_cursor):
                                break  # the side line comes next
                            if now == end_at and test_cursor(end_cursor):
                                end_at = -2
                                break
                        elif status == RUN_END:
                            end_at = -2
                            break
                        elif status == RUN_UNREAD:
                            self._unread = True  # read below, field by field
                        elif status < 0:
                            self._bad_read(
                                OSError(-status, os.strerror(-status)),
                                bad_in_a_row := bad_in_a_row + 1,
                            )
                        continue
                    if self._held:
                        self._held = False
                        now = self._realtime
                    elif self._unread:
                        self._unread = False
                        now = self._realtime = realtime()
                    else:
                        try:
                            if not next_():
                                end_at = -2
                                break
                            bad_in_a_row = 0
                        except OSError as exc:
                            self._bad_read(exc, bad_in_a_row := bad_in_a_row + 1)
                            continue
                        now = self._realtime = realtime()
                    count += 1
                    if first:
                        first = False
                        self._side_cursor = ""  # cursor() is the unit reader's again
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
                    elif start is not None and inv_raw == start[1] and self._continues_start(start):
                        yield raw  # the next whole line of the container start just yielded
                    else:
                        entry, own = self._entry(raw, inv_raw)
                        context = inv_raw if own else None
                        start = self._last_start
                        if entry is not None:
                            yield entry
                    # A realtime is nearly always one entry's; the cursor decides.
                    if now == stop_at and test_cursor(stop_cursor):
                        break  # the side line comes next
                    if now == end_at and test_cursor(end_cursor):
                        end_at = -2
                        break
        finally:
            if self._behind:
                # Closed inside a read-ahead run: back to the line handed out last.
                self._step_back(self._behind)
                self._behind = 0
            self._count_faults()
            if now >= 0:
                self.last_realtime_us = now

    def _step_back(self, entries: int) -> None:
        """Move the unit reader back `entries` entries: onto the line handed out last."""
        reader = self.reader
        for _ in range(entries):
            reader._previous()
        if int(reader._get_realtime()) != self._realtime:
            raise JournalError("the journal reader lost its place reading back (a libsystemd bug)")

    def _behind_read(self, read: Callable[[], Any]) -> Any:
        """`read()` on the line handed out last while the reader is ahead of it."""
        reader = self.reader
        behind = self._behind
        self._step_back(behind)
        try:
            return read()
        finally:
            for _ in range(behind):
                reader._next()

    def _count_faults(self) -> None:
        """Report the SIGBUS faults survived since the last look (a file truncated under us)."""
        faults = sigbus.faults()
        if faults > self._faults_seen:
            if self.truncated_reads == 0:
                log.error(
                    "journal_file_truncated",
                    faults=faults - self._faults_seen,
                    action="the truncated part reads as corrupt and is skipped",
                )
            self.truncated_reads += faults - self._faults_seen
            self._faults_seen = faults

    def _bad_read(self, exc: OSError, in_a_row: int) -> None:
        """A read failed: skip a corrupt entry or file (EBADMSG) and say so, else raise."""
        if exc.errno != errno.EBADMSG:
            raise JournalError(f"reading the journal failed: {exc}") from exc
        self.corrupt_reads += 1
        if self.corrupt_reads == 1:
            log.warning("journal_file_corrupt", error=str(exc), action="skipped")
        if in_a_row >= _MAX_BAD_IN_A_ROW:
            # The reader does not move past it: reading on would loop forever.
            raise JournalError(
                f"reading the journal failed: {in_a_row} corrupt reads in a row "
                "without progress (run `journalctl --verify`)"
            ) from exc

    def _refresh(self) -> None:
        """Let the side and probe readers see files added or removed since the last round (the
        daemon polls and processes the unit reader)."""
        for reader in (self._side, self._probe):
            if reader is not None:
                with contextlib.suppress(OSError):
                    reader.process()

    def _next_side(self) -> None:
        """Read the next side line into `_pending`, if there is one."""
        side = self._side
        if side is None:
            return
        bad_in_a_row = 0
        while True:
            try:
                if not side._next():
                    return
            except OSError as exc:
                self._bad_read(exc, bad_in_a_row := bad_in_a_row + 1)
                continue
            bad_in_a_row = 0
            if self._take_side():
                return

    def _take_side(self) -> bool:
        """Make the side reader's current line `_pending`; False when it is not one."""
        side = self._side
        get = side._get
        # A line of a watched unit itself is the unit reader's (PID 1 is never a watched unit).
        if _first(get, ("_SYSTEMD_UNIT",)) in self._unit_set:
            return False
        try:
            raw = get("MESSAGE")
        except KeyError:
            raw = b""
        entry = self._manager_entry(get, raw, int(side._get_realtime()))
        if entry is None:
            return False
        cursor = str(side._get_cursor())
        try:
            usec, boot = side._get_monotonic()
            self._pending_mono = (int(usec), bytes(boot).hex())
        except OSError:
            self._pending_mono = None
        self._pending = entry
        self._pending_cursor = cursor
        self._pending_after = self._last_unit_line(cursor)
        return True

    def _last_unit_line(self, before: str | None) -> tuple[int, str] | None:
        """(realtime, cursor) of the last unit line before the entry at cursor `before` (None:
        the last unit line of all), or None when there is none."""
        probe = self._probe
        if probe is None:
            return None
        try:
            if before is None:
                probe.seek_tail()
            else:
                probe.seek_cursor(before)
            if not probe._previous():
                return None
            return int(probe._get_realtime()), str(probe._get_cursor())
        except OSError:
            return None

    def _side_due(self) -> bool:
        """Whether the pending side line comes before the unit reader's next line."""
        after = self._pending_after
        if after is None:
            return True  # no unit line before it at all
        reader = self.reader
        try:
            if reader.test_cursor(after[1]):
                # On the unit line before it: handed out already, unless it is held.
                return not self._held
            current = str(reader._get_cursor())
        except OSError:
            # On no line: after a seek with no unit line after it, nothing is to come before
            # the side line; else (never moved) the unit line before it is still to come.
            return self._unit_ended
        # The unit line before it is behind the reader's: the side line is due (it sorts
        # before what is still to come; a late file can even put it before lines handed out).
        return _cursor_before(after[1], current)

    def _entry(self, raw: bytes, inv_raw: bytes | None) -> tuple[JournalEntry | None, bool]:
        """The full record of one unit line, and whether it is a watched unit's own line."""
        get = self.reader._get
        self._last_start = None
        units = self._unit_set
        try:
            unit = get("_SYSTEMD_UNIT").decode("utf-8", "replace")
        except KeyError:
            unit = ""
        if unit not in units:
            if self._containers:
                name = _first(get, ("CONTAINER_NAME",))
                if name is not None and name in self._containers:
                    if not self._from_engine(name):
                        return None, False
                    return self._container_entry(name, raw, inv_raw), False
            return None, False
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
            realtime_us=self._realtime,
            invocation_id=inv,
            cmdline=cmdline,
        )
        return entry, True

    def _from_engine(self, name: str) -> bool:
        """Whether dockerd sent the entry naming container `name`; else it is counted, ignored
        and the first such entry of this source is logged."""
        get = self.reader._get
        why = engine_mismatch(lambda field: _first(get, (field,)), self.docker_units)
        if why is None:
            return True
        self.forged_entries += 1
        if self.forged_entries == 1:
            log.warning(
                "forged_entry_ignored",
                target=target_of(name),
                reason=why,
                pid=_first(get, ("_PID",)),
                action="only dockerd's own lines count for a container; if dockerd runs under "
                "another unit, list it in docker_units",
            )
        return False

    def _container_entry(self, name: str, raw: bytes, inv_raw: bytes | None) -> JournalEntry | None:
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
            output=_first(get, ("PRIORITY",)),
        )
        if line is None:
            return None  # a piece of a longer line; the entry with its last piece yields it
        epoch = _first(get, ("CONTAINER_LOG_EPOCH",))
        # The fast path of lines() takes the next entry with this epoch from the same process
        # of the same dockerd invocation (both fields journald's own) as a line of this start,
        # without the checks of _from_engine: the epoch alone is the client's to write.
        pid = _first(get, ("_PID",))
        self._last_start = (
            (epoch.encode(), inv_raw, pid.encode()) if epoch and inv_raw and pid else None
        )
        return JournalEntry(
            unit=target,
            message=clean_message(line),
            realtime_us=self.realtime_us(),
            invocation_id=start_id(_first(get, ("CONTAINER_ID_FULL",)) or "", epoch),
        )

    def _continues_start(self, start: tuple[bytes, bytes, bytes]) -> bool:
        """The entry is a whole line (no piece) of the container start `start` (epoch,
        invocation, pid), sent by the process that sent its last line."""
        if self._partials.pending:
            return False  # this entry may end a split line: join it the slow way
        get = self.reader._get
        try:
            if get("CONTAINER_LOG_EPOCH") != start[0] or get("_PID") != start[2]:
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

    def _manager_entry(self, get: Any, raw: bytes, realtime_us: int) -> JournalEntry | None:
        """PID 1 (or systemd-coredump) talking about a watched unit, or None."""
        about = _first(get, ("UNIT", "COREDUMP_UNIT"))
        if about is None or about not in self._unit_set:
            return None
        pid_raw = _first(get, ("_PID",))
        return JournalEntry(
            unit=about,
            message=clean_message(raw),
            realtime_us=realtime_us,
            invocation_id=_first(get, ("INVOCATION_ID",)),
            from_pid1=pid_raw == "1",
            message_id=_first(get, ("MESSAGE_ID",)),
            pid=int(pid_raw) if pid_raw and pid_raw.isdigit() else None,
        )

    def realtime_us(self) -> int:
        """The realtime timestamp (µs) of the unit line the generator is suspended on."""
        return self._realtime

    def monotonic(self) -> tuple[int, str] | None:
        """The monotonic timestamp (µs since boot) and boot id of the entry handed out last."""
        if self._side_cursor:
            return self._side_mono
        try:
            if self._behind:
                usec, boot = self._behind_read(self.reader._get_monotonic)
            else:
                usec, boot = self.reader._get_monotonic()
        except OSError:
            return None
        return int(usec), bytes(boot).hex()

    def cursor(self) -> str | None:
        """The cursor of the entry last read, or None before the first read."""
        if self._side_cursor:
            return self._side_cursor
        try:
            if self._behind:
                return str(self._behind_read(self.reader._get_cursor))
            return str(self.reader._get_cursor())
        except OSError:
            return None

    def fileno(self) -> int:
        """The fd that becomes readable when the journal changes (inotify), for poll()."""
        return int(self.reader.fileno())

    def poll_events(self) -> int:
        """The poll() event mask to wait for on `fileno()`."""
        return int(self.reader.get_events())

    def timeout_ms(self) -> int | None:
        """The longest poll() may sleep before the journal needs a look anyway (None: no limit).

        libsystemd asks for one when it cannot watch every file with inotify.
        """
        timeout = self.reader.get_timeout_ms()
        return None if timeout is None or timeout < 0 else int(timeout)

    def acknowledge_changes(self) -> None:
        """Take in what woke `fileno()` (new or rotated files); until then the fd stays readable."""
        self.reader.process()

    def close(self) -> None:
        for reader in (self._reader, self._side, self._probe):
            if reader is not None:
                reader.close()
        self._reader = self._side = self._probe = None


def add_unit_matches(reader: Any, units: Sequence[str]) -> None:
    """Select the units' own lines (one field: libsystemd ORs the values, no disjunction)."""
    for unit in units:
        reader.add_match(_SYSTEMD_UNIT=unit)


def add_manager_matches(reader: Any, units: Sequence[str]) -> None:
    """Select the rest of what `journalctl -u UNIT` selects: PID 1's lines about the units and
    their coredumps (systemd's add_matches_for_unit)."""
    for unit in units:
        reader.add_match(_PID="1", UNIT=unit)
        reader.add_disjunction()
        reader.add_match(MESSAGE_ID=_COREDUMP_MESSAGE_ID, _UID="0", COREDUMP_UNIT=unit)
        reader.add_disjunction()


def _cursor_before(a: str, b: str) -> bool:
    """Whether the entry at cursor `a` sorts before the one at cursor `b`, as libsystemd orders
    entries of different files: by sequence number within one journal, else by time."""
    fa, fb = _cursor_fields(a), _cursor_fields(b)
    try:
        if fa.get("s") == fb.get("s"):
            return int(fa.get("i", "0"), 16) < int(fb.get("i", "0"), 16)
        if fa.get("b") == fb.get("b"):
            return int(fa.get("m", "0"), 16) < int(fb.get("m", "0"), 16)
        return int(fa.get("t", "0"), 16) < int(fb.get("t", "0"), 16)
    except ValueError:
        return False


def _cursor_fields(cursor: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in cursor.split(";") if "=" in part)


def _first(get: Any, fields: tuple[str, ...]) -> str | None:
    for name in fields:
        try:
            return str(get(name).decode("utf-8", "replace"))
        except KeyError:
            continue
    return None


# The system journal's directories, as sd_journal_open(SYSTEM_ONLY) reads them.
_SYSTEM_JOURNAL_DIRS = (Path("/var/log/journal"), Path("/run/log/journal"))
# Errors that say "not a journal libsystemd can read" (not: no permission, gone meanwhile).
_NOT_READABLE = frozenset({errno.EBADMSG, errno.EPROTONOSUPPORT, errno.ENODATA, errno.EINVAL})


def unreadable_files(directory: Path | None) -> tuple[tuple[Path, str], ...]:
    """Journal files that libsystemd would skip without a word when it opens their directory.

    `directory` None means the local system journal (`system*.journal` of this machine).
    Each file is opened on its own, which fails with the reason (e.g. "Bad message").
    """
    if directory is not None:
        candidates = sorted(directory.glob("*.journal")) + sorted(directory.glob("*.journal~"))
    else:
        machine = _machine_id()
        candidates = (
            [
                path
                for base in _SYSTEM_JOURNAL_DIRS
                for pattern in ("system*.journal", "system*.journal~")
                for path in sorted((base / machine).glob(pattern))
            ]
            if machine
            else []
        )
    out = []
    for path in candidates:
        try:
            journal.Reader(files=[str(path)]).close()
        except OSError as exc:
            if exc.errno in _NOT_READABLE:
                out.append((path, exc.strerror or str(exc)))
    return tuple(out)


def _machine_id() -> str | None:
    try:
        return Path("/etc/machine-id").read_text().strip() or None
    except OSError:
        return None
