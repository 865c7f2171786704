"""The file source: log files of a directory layout, followed with inotify, read exactly once.

A layout (dockerfiles.py: Docker's json-file logs; podlogs.py: the kubelet's pod logs) names
*streams*: the files of one container start, or of one container, oldest first (rotated ones,
gzipped or not, then the live file). The source reads each stream's lines in order and hands
the tracker the same items the journal source does (a JournalEntry, or raw bytes for the next
line of the same start), so rules, startups, state and outputs do not know where lines came from.

Position. A stream's position is the file it is in, by identity (device, inode and a fingerprint
of the file's first bytes), and the offset after the last line handed out. The identity finds the
file again after a rename (`-json.log` -> `.1`, `0.log` -> `0.log.<time>`) and after it was
gzipped (inode changed, fingerprint of the content the same); a reused inode or a file truncated
and rewritten has another fingerprint, so it is read from its start. The positions are the
source's cursor, a JSON document the pipeline commits in the transaction that stores the records
derived from the lines before it (state.py), so a crash loses nothing and repeats nothing.

Pieces. A line Docker or containerd split (16 KiB pieces: json-file `log` without the final
newline, CRI tag `P`) is joined before any rule sees it; until its last piece is read the
stream's saved position stays before the first piece, so a restart reads the whole line again.

Files that vanish. A file removed while it is read is read to its end through the open file; a
file truncated under the reader (shorter than the position, or another first line) is read on
in a copy of it when there is one (copytruncate's `.1`), else again from its start, counted.
"""

from __future__ import annotations

import calendar
import contextlib
import gzip
import hashlib
import json
import os
import re
import select
import time
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, Literal, Protocol

from ..errors import JournalError
from ..logs import Logger
from ..model import JournalEntry, PodRef, SourceItem
from ..text import clean_message
from .readers import fast_file_run

if TYPE_CHECKING:
    from .inotify import Inotify

log = Logger("sglang_sentinel")

LineFormat = Literal["docker", "cri"]
# A file's fingerprint covers its first line (every line has its own time stamp, so no two
# files' first lines are alike; Docker writes the time last, after up to 16 KiB of text), at
# most this many bytes of it, fewer while the file is shorter.
FINGERPRINT_BYTES: Final = 1 << 17
# A joined line longer than this is cut (a server_args line is ~50 KB).
MAX_LINE_BYTES: Final = 1 << 20
# Positions kept for streams no longer found (a directory unreadable for a while must not make
# a stream start over when it comes back): the newest this many by their last line's time; the
# older ones are forgotten, in memory and in the cursor alike.
POSITIONS_KEPT: Final = 4096
# Memory holds at most this many gone streams' positions more before it forgets down to
# POSITIONS_KEPT again (a trim sorts them: not at every listing of a crash-looping pod).
POSITIONS_SLACK: Final = POSITIONS_KEPT // 16
CURSOR_VERSION: Final = 1
# A file is read in blocks of this size, its lines cut with bytes.find (not readline).
BLOCK_BYTES: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class Stream:
    """The files of one log stream, as a layout found them."""

    key: str  # stable and unique: the position is saved under it
    target: str  # identity key: docker:NAME, k8s:NS/WORKLOAD/CONTAINER
    fmt: LineFormat
    files: tuple[Path, ...] = ()  # oldest first; the last is the live file
    # The start id of every line (a pod container's N.log is one start); None: the stream
    # holds several starts (a Docker container across restarts), told apart by its lines.
    start: str | None = None
    # Seeds the start ids of a stream with several starts (the container id).
    seed: str = ""
    # The pod whose container wrote it (pod logs): its name is the `k8s_pod` label of its
    # target's pod_info, its uid finds the pod's labels from the API.
    pod: PodRef | None = None


class Layout(Protocol):
    """Where a kind of log files lives and how its streams are named."""

    root: Path  # the directory the layout is under (Docker's root, the kubelet's pod logs)

    @property
    def targets(self) -> tuple[str, ...]:
        """The identity keys its streams can have."""
        ...

    def streams(self) -> list[Stream]: ...

    def directories(self) -> list[Path]:
        """The directories to watch now (their files and subdirectories change the streams)."""
        ...

    def files(self, stream: Stream) -> tuple[Path, ...]:
        """The stream's files now, oldest first (the layout listed again)."""
        ...


def found(layout: Layout, stream: Stream) -> list[Stream]:
    """`stream` with the files `layout` lists for it now, or nothing when it has none."""
    files = layout.files(stream)
    return [replace(stream, files=files)] if files else []


@dataclass(slots=True)
class _Position:
    """Where one stream is: a file (identity + open handle) and the offset after the last line
    handed out; pieces of a split line held, with the offset before the first."""

    dev: int = 0
    ino: int = 0
    fp: str = ""
    fplen: int = 0
    fp_whole: bool = False  # the fingerprint covers all it ever will (in memory only)
    offset: int = 0
    gz: bool = False
    path: Path | None = None
    fh: IO[bytes] | None = None
    # Pieces of split lines held, per output (stdout, stderr: a runtime interleaves the two,
    # so a stdout line can come between the pieces of a stderr line): [text, offset of the
    # first piece, its time].
    pieces: dict[bytes, list[Any]] = field(default_factory=dict)
    # After a restart at a position before held pieces: lines that end before `replay_until`
    # were handed out already; only the pieces of outputs in `replay` (from their offsets on)
    # are collected again.
    replay_until: int = 0
    replay: dict[bytes, int] = field(default_factory=dict)
    start: str | None = None  # the start the last line belonged to (streams without a fixed one)
    args_seen: bool = False  # that start has had its server_args line
    last_us: int = 0
    found: bool = False  # positioned on a file (not just restored from a cursor)
    skip_us: int = 0  # lines up to this time were handed out before (the position was lost)
    # Where the file before this one was read to, while this one is still empty: an empty file
    # has no fingerprint to be found by once it has been renamed or gzipped.
    previous: dict[str, Any] | None = None
    # The block read last and the file offset of its first byte; the file handle is at the
    # block's end (in memory only; None: seek to `offset` first).
    buf: bytes | None = None
    buf_at: int = 0

    def saved(self) -> dict[str, Any]:
        if self.fplen == 0 and self.previous is not None and not self.pieces:
            return {**self.previous, "s": self.start, "a": self.args_seen, "t": self.last_us}
        doc = {
            "d": self.dev,
            "i": self.ino,
            "f": self.fp,
            "n": self.fplen,
            "o": self.offset,
            "s": self.start,
            "a": self.args_seen,
            "t": self.last_us,
        }
        if self.pieces:
            # Read again from the first held piece; what was handed out after it is skipped.
            held = {out.decode("ascii", "replace"): piece[1] for out, piece in self.pieces.items()}
            doc.update(o=min(held.values()), y=self.offset, p=held)
        return doc


def _fingerprint(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def _first_line(head: bytes) -> bytes:
    """What a fingerprint covers of a file's first bytes: its first line, newline included."""
    end = head.find(b"\n")
    return head if end < 0 else head[: end + 1]


def _whole(covered: bytes) -> bool:
    """Whether a fingerprint's bytes are final: a whole first line, or the most it covers."""
    return covered.endswith(b"\n") or len(covered) >= FINGERPRINT_BYTES


def _open(path: Path) -> IO[bytes]:
    if path.name.endswith(".gz"):
        return gzip.GzipFile(path, "rb")  # type: ignore[return-value]  # an IO[bytes] in all but name
    return open(path, "rb")


def _head(path: Path, n: int) -> bytes | None:
    """The first `n` bytes of a file (decompressed for .gz), None when it cannot be read."""
    try:
        with _open(path) as fh:
            return fh.read(n)
    except (OSError, EOFError, gzip.BadGzipFile):
        return None


def parse_time_us(text: bytes, _cache: dict[bytes, int] | None = None) -> int | None:
    """RFC 3339 with nanoseconds (`2026-01-01T00:00:00.123456789Z`, or `+02:00`) -> unix µs."""
    if (
        _cache is not None
        and len(text) == 30
        and text[19:20] == b"."
        and text[29:30] == b"Z"
        and text[20:29].isdigit()
    ):
        # Docker's and containerd's own form, lines of one second sharing its start.
        base = _cache.get(text[:19])
        if base is not None:
            return base + int(text[20:26])
        full = _parse_time_us(text, _cache)
        if full is not None:
            if len(_cache) > 4096:
                _cache.clear()
            _cache[text[:19]] = full - int(text[20:26])
        return full
    return _parse_time_us(text, _cache)


def _parse_time_us(text: bytes, _cache: dict[bytes, int] | None) -> int | None:
    try:
        day = text[:10]
        base = _cache.get(day) if _cache is not None else None
        if base is None:
            if text[4:5] != b"-" or text[7:8] != b"-":
                return None
            base = calendar.timegm((int(day[0:4]), int(day[5:7]), int(day[8:10]), 0, 0, 0, 0, 0, 0))
            if _cache is not None:
                if len(_cache) > 4096:
                    _cache.clear()
                _cache[day] = base
        if text[10:11] not in (b"T", b"t", b" ") or text[13:14] != b":" or text[16:17] != b":":
            return None
        base += int(text[11:13]) * 3600 + int(text[14:16]) * 60 + int(text[17:19])
        rest = text[19:]
        us = 0
        if rest[:1] == b".":
            end = 1
            while end < len(rest) and 48 <= rest[end] <= 57:
                end += 1
            us = int(rest[1:end][:6].ljust(6, b"0"))
            rest = rest[end:]
        offset = 0
        if rest[:1] in (b"+", b"-") and len(rest) >= 6:
            offset = (int(rest[1:3]) * 60 + int(rest[4:6])) * 60
            if rest[:1] == b"-":
                offset = -offset
        elif rest[:1] not in (b"Z", b"z"):
            return None
        return (base - offset) * 1_000_000 + us
    except ValueError:
        return None


def start_id(seed: str, realtime_us: int) -> str:
    """The id of a start found in a stream's lines: its seed (container id) and first line."""
    return hashlib.sha256(f"file\0{seed}\0{realtime_us}".encode()).hexdigest()[:32]


class FileSource:
    """Follows the streams of one or more layouts; the journal source's interface (source.py)."""

    def __init__(self, layouts: Sequence[Layout], *, clock: Any = time.time) -> None:
        self.layouts = tuple(layouts)
        self._clock = clock
        self._streams: list[Stream] = []
        self._layout_of: dict[str, Layout] = {}
        self._first_us: dict[str, int] = {}  # the time of a stream's first line, once known
        self._positions: dict[str, _Position] = {}
        self._inotify: Inotify | None = None
        self._layout_changed = True
        self._since_us: int | None = None  # streams read from their start skip older lines
        self._realtime = 0
        self._time_cache: dict[bytes, int] = {}
        self._current: str | None = None  # the start of the last line handed out, this stream
        # The C reader's run of common lines (readers.py), None: every line cut in Python.
        self._run: Any = fast_file_run()
        self.corrupt_reads = 0  # lines that are not the layout's format, skipped
        self.truncated_reads = 0  # files found shorter than the position in them
        self.unreadable_files: tuple[tuple[Path, str], ...] = ()
        self.forged_entries = 0  # files have no fields another process could forge
        self.units = tuple(t for layout in self.layouts for t in layout.targets)
        # start id -> pod of the pod streams listed last (replaced whole: scrapes read it).
        self.pods: Mapping[str, PodRef] = {}
        self._listed: set[str] = set()  # the streams whose files the last listing found
        self._read_any = False

    @property
    def last_realtime_us(self) -> int | None:
        """The time of the last line handed out (None before any)."""
        return self._realtime if self._realtime else None

    # -- opening and positioning ---------------------------------------------------------------

    def open(self, *, follow: bool = True) -> None:
        """List the layouts (and watch their directories when `follow`); a layout's directory
        that is not there is an error (a mistyped --pod-logs would otherwise find nothing)."""
        for layout in self.layouts:
            if not layout.root.is_dir():
                raise JournalError(
                    f"log directory {layout.root} does not exist (set docker_root or "
                    "kubernetes.pod_logs, --docker-root or --pod-logs, to where the files are)"
                )
            # Not an error: the journal's units and journald-driver containers still work. But
            # a layout this user cannot list finds nothing, silently (Docker's root is
            # root:root 0710: the shipped unit, a dynamic user, cannot list it).
            try:
                with os.scandir(layout.root):
                    pass
            except PermissionError as exc:
                log.warning(
                    "log_directory_unreadable",
                    directory=str(layout.root),
                    error=exc.strerror,
                    hint="its files are not read; on a Docker host install the drop-in "
                    "deploy/dropins/docker-host.conf (README, Containers)",
                )
        if follow:
            from .inotify import Inotify, InotifyError  # ctypes: only a following source

            try:
                self._inotify = Inotify()
            except InotifyError as exc:
                raise JournalError(str(exc)) from exc
        self._discover()

    def close(self) -> None:
        for pos in self._positions.values():
            self._close_file(pos)
        if self._inotify is not None:
            self._inotify.close()
            self._inotify = None

    def seek_head(self) -> None:
        self._reset()
        self._since_us = None

    def seek_realtime(self, seconds: float) -> None:
        self._reset()
        self._since_us = int(seconds * 1_000_000)

    def seek_boot_start(self, boot_id: str | None = None) -> None:
        """From this boot's start: files outlive a reboot (/var/log/pods, /var/lib/docker)."""
        self._reset()
        self._since_us = int(_boot_time() * 1_000_000)

    def seek_cursor(self, cursor: str) -> bool:
        """Resume at the positions of `cursor`; streams it does not name are read from their
        start. False when the cursor is not one of this source's (read from the start)."""
        self._reset()
        self._since_us = None
        try:
            doc = json.loads(cursor)
            if isinstance(doc, dict) and "files" in doc and "v" not in doc:
                doc = doc["files"]  # a combined source's cursor
            if not isinstance(doc, dict) or doc.get("v") != CURSOR_VERSION:
                return False
            for key, saved in doc["s"].items():
                pos = _Position(
                    dev=int(saved["d"]),
                    ino=int(saved["i"]),
                    fp=str(saved["f"]),
                    fplen=int(saved["n"]),
                    offset=int(saved["o"]),
                    start=saved.get("s"),
                    args_seen=bool(saved.get("a")),
                    last_us=int(saved.get("t", 0)),
                    replay_until=int(saved.get("y", 0)),
                    replay={str(k).encode(): int(v) for k, v in saved.get("p", {}).items()},
                )
                self._positions[str(key)] = pos
        except (ValueError, KeyError, TypeError, AttributeError):
            self._reset()
            return False
        return True

    @staticmethod
    def cursor_time(cursor: str) -> float:
        """The time of the newest line a cursor of this source is after (unix seconds)."""
        try:
            doc = json.loads(cursor)
            if "files" in doc and "v" not in doc:
                doc = doc["files"]
            return max((int(p.get("t", 0)) for p in doc["s"].values()), default=0) / 1e6
        except (ValueError, KeyError, TypeError, AttributeError):
            return 0.0

    def _reset(self) -> None:
        for pos in self._positions.values():
            self._close_file(pos)
        self._positions.clear()
        self._read_any = False

    # -- following ------------------------------------------------------------------------------

    def fileno(self) -> int:
        if self._inotify is None:
            raise JournalError("the file source is not following (opened with follow=False)")
        return self._inotify.fileno()

    def poll_events(self) -> int:
        return select.POLLIN

    def timeout_ms(self) -> int | None:
        return None

    def acknowledge_changes(self) -> None:
        """Take in the inotify events queued; a created, renamed or removed file lists the
        layouts again before the next read."""
        if self._inotify is None:
            return
        from .inotify import LAYOUT_EVENTS

        for _path, mask, _name in self._inotify.read():
            if mask & LAYOUT_EVENTS:
                self._layout_changed = True

    def _discover(self) -> None:
        previous = self._streams
        streams: list[Stream] = []
        for layout in self.layouts:
            if self._inotify is not None:
                # A directory that vanished drops its own watch (IN_IGNORED); one made since
                # the last listing is watched from now on.
                for path in layout.directories():
                    self._inotify.watch(path)
            for stream in layout.streams():
                streams.append(stream)
                self._layout_of[stream.key] = layout
        # A stream whose files are gone while one is open is read to the end of that file.
        listed = self._listed = {s.key for s in streams}
        # The pods whose files are there now (a removed pod's open file is not a current pod).
        self.pods = {s.start: s.pod for s in streams if s.start and s.pod}
        for old in self._streams:
            pos = self._positions.get(old.key)
            if old.key not in listed and pos is not None and pos.fh is not None:
                streams.append(old)
        self._streams = sorted(streams, key=self._order)
        self._layout_changed = False
        self._prune(left={old.key for old in previous} - {s.key for s in self._streams})

    def _prune(self, left: set[str]) -> None:
        """Forget what streams no longer there hold in memory (`left`: those the listing just
        dropped): their layout and first line's time at once, and, past POSITIONS_KEPT plus
        the slack, the positions of gone streams the cursor would not save either. A
        crash-looping pod makes a stream per restart, a Docker host a container per `run`;
        without this the three grew with every one the daemon ever saw."""
        for key in left:
            self._layout_of.pop(key, None)
            self._first_us.pop(key, None)
        if len(self._positions) > len(self._streams) + POSITIONS_KEPT + POSITIONS_SLACK:
            for key in self._forgotten(self._positions, {s.key for s in self._streams}):
                del self._positions[key]

    def _order(self, stream: Stream) -> tuple[int, str]:
        """Streams in the order they started: the time of their first line (unknown: last)."""
        known = self._first_us.get(stream.key)
        if known is not None:
            return (known, stream.key)
        for path in stream.files:
            head = _head(path, 1 << 16)
            if head:
                t = self._line_time(stream.fmt, head.split(b"\n", 1)[0])
                if t is not None:
                    self._first_us[stream.key] = t
                    return (t, stream.key)
        return (1 << 62, stream.key)

    def _line_time(self, fmt: LineFormat, line: bytes) -> int | None:
        if fmt == "cri":
            return parse_time_us(line.split(b" ", 1)[0], self._time_cache)
        try:
            obj = json.loads(line)
            return parse_time_us(str(obj["time"]).encode(), self._time_cache)
        except (ValueError, KeyError, TypeError):
            return None

    # -- reading --------------------------------------------------------------------------------

    def lines(self, limit: int | None = None) -> Iterator[SourceItem]:
        """The lines available now, stream after stream in the order they started: a
        JournalEntry for a stream's first line here and for a new start, raw bytes (the
        journal source's fast path) for the next line of the same start."""
        if self._layout_changed or self._inotify is None:
            self._discover()
        left = limit
        for stream in list(self._streams):
            if left is not None and left <= 0:
                return
            self._current = None  # the first line of each stream here is a JournalEntry
            n = yield from self._read(stream, left)
            if left is not None:
                left -= n

    def _read(self, stream: Stream, left: int | None) -> Generator[SourceItem, None, int]:
        """One stream's lines from its position on, its files in turn (at most `left`);
        returns how many."""
        pos = self._positions.get(stream.key)
        if pos is None:
            pos = self._positions[stream.key] = _Position()
        if not pos.found and not self._locate(stream, pos):
            return 0
        # Truncated and written again past the position since the last read (copytruncate, a
        # `truncate -s 0` while the engine writes on): found by its first line, before reading
        # from the middle of another line.
        self._check_truncation(stream, pos)
        n = 0
        # Never the same file twice in one round (an empty rotated file has no identity to be
        # told from the others by); a file made again under a name is another file.
        entered: set[tuple[Path | None, int, int, str]] = set()
        while pos.fh is not None:
            entered.add((pos.path, pos.dev, pos.ino, pos.fp))
            n += yield from self._read_file(stream, pos, pos.fh, _less(left, n))
            if left is not None and n >= left:
                return n
            newer = self._newer_files(stream, pos)
            if not newer:
                if self._check_truncation(stream, pos):
                    continue  # read again from its start
                if stream.key not in self._listed and not pos.pieces and self._unlinked(pos):
                    # Its files are gone (`docker rm`, a deleted pod) and this one is read to
                    # its end: no writer is left to add to it. Let it go (its position stays
                    # for the cursor), or a long-running daemon holds one per removed stream.
                    self._close_file(pos)
                return n
            # The writer has moved on to a newer file; what it wrote to this one before that
            # (after the read above reached its end) is read first.
            if pos.fh is not None:
                n += yield from self._read_file(stream, pos, pos.fh, _less(left, n))
                if left is not None and n >= left:
                    return n
            before = pos.saved() if pos.fplen else pos.previous
            # A replay after a restart was of this file's lines, read to its end now: its
            # offsets say nothing about the next file's (they dropped its first lines).
            pos.replay_until, pos.replay = 0, {}
            if not any(self._enter(pos, p, 0, entered) for p in newer):
                return n
            pos.previous = before
        return n

    def _locate(self, stream: Stream, pos: _Position) -> bool:
        """Put a stream's position on a file: the one its saved identity names, else (a new
        stream, or its file gone) the oldest one there is."""
        files = self._files(stream)
        if not files:
            return False
        if pos.fp or pos.dev:
            unsure = False
            for path in files:
                found = self._identify(pos, path)
                if found and self._enter(pos, path, pos.offset):
                    return True
                unsure = unsure or found is None or bool(found)
            # Not there by its inode: a copy of it (logrotate's copytruncate copied it to `.1`
            # and truncated it while we were stopped) goes on where the position was.
            copy = self._copy_of(files, pos)
            if copy is not None and self._enter(pos, copy, pos.offset):
                return True
            pos.pieces.clear()
            pos.replay_until, pos.replay = 0, {}
            if unsure:
                # The saved file may be there but could not be read or opened: lines up to
                # the last one handed out are skipped by their time.
                log.warning(
                    "log_file_position_lost",
                    stream=stream.key,
                    action="read from the oldest file, after the time of the last line read",
                )
                pos.skip_us = pos.last_us
            else:
                # The saved file is gone (rotated away while we were stopped): rotation removes
                # the oldest file first, so every file there is newer and is read whole.
                log.info("log_file_rotated_away", stream=stream.key, action="read the newer files")
        return any(self._enter(pos, path, 0) for path in files)

    def _files(self, stream: Stream) -> tuple[Path, ...]:
        layout = self._layout_of.get(stream.key)
        return layout.files(stream) if layout is not None else stream.files

    def _is(self, pos: _Position, path: Path) -> bool:
        """Whether `path` is the file the position names (a gzipped copy of it included)."""
        return bool(self._identify(pos, path))

    @staticmethod
    def _identify(pos: _Position, path: Path, by_content: bool = False) -> bool | None:
        """Whether `path` is the position's file (`by_content`: or a copy of it, any inode);
        None when that cannot be told (it vanished between the listing and the look, or its
        first bytes cannot be read)."""
        gz = path.name.endswith(".gz")
        if by_content and pos.fplen == 0:
            return False  # an empty file's copy is nothing to go on in
        if not gz and not by_content:
            try:
                st = os.stat(path)
            except OSError:
                return None
            if (st.st_dev, st.st_ino) != (pos.dev, pos.ino):
                return False
        if pos.fplen == 0:
            return not gz
        head = _head(path, pos.fplen)
        if head is None:
            return None
        return len(head) == pos.fplen and _fingerprint(head) == pos.fp

    def _enter(
        self,
        pos: _Position,
        path: Path,
        offset: int,
        entered: set[tuple[Path | None, int, int, str]] | None = None,
    ) -> bool:
        """Open `path` at `offset` as the position's file; False when it cannot be opened.

        Pieces of a split line still held go on into the new file (a writer that rotated in the
        middle of one); their saved position is then the new file's start."""
        try:
            fh = _open(path)
            if path.name.endswith(".gz"):
                dev, ino = 0, 0
            else:
                st = os.fstat(fh.fileno())
                dev, ino = st.st_dev, st.st_ino
                if st.st_size < offset:
                    self._truncated(path, pos)
                    offset = 0
            head = fh.read(FINGERPRINT_BYTES)
            fh.seek(offset)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            log.warning("log_file_unreadable", file=str(path), error=str(exc))
            return False
        head = _first_line(head)
        if entered is not None and (path, dev, ino, _fingerprint(head)) in entered:
            fh.close()
            return False
        self._close_file(pos)
        pos.fh, pos.path, pos.gz = fh, path, path.name.endswith(".gz")
        pos.buf = None
        pos.dev, pos.ino = dev, ino
        pos.fp, pos.fplen, pos.fp_whole = _fingerprint(head), len(head), _whole(head)
        pos.offset = offset
        for piece in pos.pieces.values():
            piece[1] = offset
        pos.found = True
        return True

    def _truncated(self, path: Path, pos: _Position) -> None:
        self.truncated_reads += 1
        log.warning("log_file_truncated", file=str(path), action="read again from its start")
        pos.pieces.clear()
        pos.replay_until, pos.replay = 0, {}

    def _newer_files(self, stream: Stream, pos: _Position) -> tuple[Path, ...]:
        """At the end of the position's file: the stream's files newer than it (it was rotated
        or replaced); none when it is the newest."""
        files = self._files(stream)
        here = None
        for i, path in enumerate(files):
            if path == pos.path and not pos.gz and self._same_inode(path, pos):
                here = i
                break
        if here is None:
            for i, path in enumerate(files):
                if self._is(pos, path):
                    here = i
                    break
        if here is None and pos.fplen == 0:
            # An empty file has no fingerprint to be found by (and a gzipped one no inode in
            # its position): it is the listed file that is the one open, under whatever name it
            # has now. Not the one with its old name: rotation renames an empty `.1.gz` to
            # `.2.gz` and makes a new `.1.gz` of the live file, which would be passed over.
            here = self._open_index(files, pos)
        if here is not None and here == len(files) - 1:
            return ()
        if here is not None:
            return files[here + 1 :]
        # Not there at all. Removed (rotated away, or the container's file replaced): rotation
        # removes the oldest file first, so the files there are all newer and are read whole.
        # Still linked (renamed out of the layout, or unreadable): lines up to the last one
        # handed out are skipped by their time, so nothing is handed out twice.
        if not self._unlinked(pos):
            pos.skip_us = max(pos.skip_us, pos.last_us)
        return files

    @staticmethod
    def _open_index(files: Sequence[Path], pos: _Position) -> int | None:
        """The index in `files` of the file the position has open (by inode), None when it
        is not among them."""
        if pos.fh is None:
            return None
        try:
            st = os.fstat(pos.fh.fileno())
        except OSError:
            return None
        if st.st_nlink == 0:
            return None
        for i, path in enumerate(files):
            try:
                other = os.stat(path)
            except OSError:
                continue
            if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
                return i
        return None

    @staticmethod
    def _unlinked(pos: _Position) -> bool:
        if pos.fh is None:
            return False
        try:
            return os.fstat(pos.fh.fileno()).st_nlink == 0
        except OSError:
            return True

    @staticmethod
    def _same_inode(path: Path, pos: _Position) -> bool:
        try:
            st = os.stat(path)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == (pos.dev, pos.ino)

    def _check_truncation(self, stream: Stream, pos: _Position) -> bool:
        """Whether the position's file was truncated in place: shorter than the position in
        it, or its first line another one (written again past the position). If so the
        position goes on in a copy of what it was (copytruncate's `.1`), else at its start."""
        if pos.fh is None or pos.gz:
            return False
        try:
            fd = pos.fh.fileno()
            size = os.fstat(fd).st_size
            if size >= pos.offset:
                if not pos.fp_whole or not pos.fplen:
                    return False  # _refresh_fingerprint follows a first line still written
                if _fingerprint(os.pread(fd, pos.fplen, 0)) == pos.fp:
                    return False
        except OSError:
            return False
        assert pos.path is not None
        path = pos.path
        copy = self._copy_of(self._files(stream), pos)
        if copy is not None and copy != path and self._enter(pos, copy, pos.offset):
            log.info("log_file_copied_and_truncated", file=str(path), copy=str(copy))
            return True
        self._truncated(path, pos)
        pos.fh.seek(0)
        pos.offset = 0
        pos.buf = None
        pos.previous = None
        try:
            head = _first_line(os.pread(fd, FINGERPRINT_BYTES, 0))
        except OSError:
            head = b""
        # Its identity from now on (a cursor naming the old first line finds it no more).
        pos.fp, pos.fplen, pos.fp_whole = _fingerprint(head), len(head), _whole(head)
        return True

    def _copy_of(self, files: Sequence[Path], pos: _Position) -> Path | None:
        """A file of `files` with the content the position is in, up to its offset (another
        inode: a copy), None when there is none."""
        for path in files:
            if self._identify(pos, path, by_content=True) and not self._same_inode(path, pos):
                try:
                    if path.name.endswith(".gz") or os.stat(path).st_size >= pos.offset:
                        return path
                except OSError:
                    continue
        return None

    def _read_file(
        self, stream: Stream, pos: _Position, fh: IO[bytes], left: int | None
    ) -> Generator[SourceItem, None, int]:
        """The file's whole lines from the position on (at most `left`); returns how many.

        It reads blocks and splits them into lines; the common line (moby's compact JSON of a
        whole line whose text has no escape but `\\"`, or a CRI `F` line, time in the
        engines' own form, no pieces held) is cut apart here, every other one goes through
        _take (the exact parse). The position (offset, block) is up to date at every line
        handed out, so a consumer may stop anywhere."""
        docker = stream.fmt == "docker"
        since = self._since_us
        tcache = self._time_cache
        fixed = stream.start
        unit = stream.target
        run = self._run
        fmt_code = 0 if docker else 1
        # A start is told by its server_args line when the stream has no fixed one.
        stop = b"server_args=" if fixed is None else b""
        n = 0
        while left is None or n < left:
            buf, base = pos.buf, pos.buf_at
            if buf is not None and base <= pos.offset <= base + len(buf):
                data = buf[pos.offset - base :]  # the rest of the block read last
            else:
                try:
                    if fh.tell() != pos.offset:  # a gzipped file seeks back by reading again
                        fh.seek(pos.offset)
                    data = fh.read(BLOCK_BYTES)
                except (OSError, EOFError, gzip.BadGzipFile) as exc:
                    log.warning("log_file_unreadable", file=str(pos.path), error=str(exc))
                    pos.buf = None
                    return n
            whole = data.rfind(b"\n") + 1
            while not whole:
                # No whole line yet: a longer one, or one being written.
                try:
                    more = fh.read(BLOCK_BYTES)
                except (OSError, EOFError, gzip.BadGzipFile) as exc:
                    log.warning("log_file_unreadable", file=str(pos.path), error=str(exc))
                    more = b""
                if not more:
                    # Read again from the line's start next time.
                    pos.buf = None
                    return n
                cut = more.rfind(b"\n")
                whole = len(data) + cut + 1 if cut >= 0 else 0
                data += more
            base = pos.offset
            pos.buf, pos.buf_at = data, base
            i = 0
            while i < whole:
                if (
                    run is not None
                    and not (pos.pieces or pos.skip_us or pos.replay_until)
                    and (pos.fp_whole or pos.gz)
                    and (fixed if fixed is not None else pos.start) == self._current
                    and self._current is not None
                ):
                    # A run of common lines of the start handed out last, cut apart in C
                    # (_fileread.c); it ends before a line it does not take, which is read below.
                    texts, times, ends = run(
                        data, i, fmt_code, BLOCK_BYTES if left is None else left - n, stop
                    )
                    if texts:
                        for text, t_us, e in zip(texts, times, ends, strict=True):
                            pos.offset = base + e
                            if t_us > pos.last_us:
                                pos.last_us = t_us
                            if since is not None and t_us < since:
                                continue
                            n += 1
                            self._realtime = t_us
                            yield text
                        i = ends[-1]
                        if left is not None and n >= left:
                            return n
                        continue
                at = base + i
                e = data.find(b"\n", i)
                line = data[i:e]
                i = e + 1
                pos.offset = base + i
                if not pos.fp_whole and not pos.gz:
                    self._refresh_fingerprint(pos)
                # The common line, cut apart here: text and time (line[-32:-2] below).
                text = ts = None
                if pos.pieces or pos.skip_us or pos.replay_until:
                    pass  # _take keeps the pieces and the replay
                elif docker:
                    head, _, rest = line.rpartition(b'","stream":"')
                    if (
                        head.startswith(b'{"log":"')
                        and head.endswith(b"\\n")
                        and rest.endswith(b'"}')
                        and rest[-42:-32] == b'","time":"'
                    ):
                        text = head[8:-2]
                        ts = rest[-32:-2]
                        if b'"' in text:
                            # moby writes a quote as \"; a text whose every backslash starts
                            # one is exact with them replaced, any other escape is JSON's. A
                            # bare quote is no JSON: two records run together (a crash's hole).
                            quotes = text.count(b'\\"')
                            if text.count(b"\\") == quotes == text.count(b'"'):
                                text = text.replace(b'\\"', b'"')
                            else:
                                text = None
                        elif b"\\" in text:
                            text = None
                else:
                    parts = line.split(b" ", 3)
                    if len(parts) == 4 and parts[2] == b"F":
                        ts, text = parts[0], parts[3]
                sec = None
                if (
                    text is not None
                    and ts is not None
                    and len(ts) == 30
                    and ts[19] == 46  # Docker's and containerd's own form, lines of one
                    and ts[29] == 90  # second sharing its start
                    and ts[20:29].isdigit()
                ):
                    sec = tcache.get(ts[:19])
                if text is not None and sec is not None:
                    t_us = sec + int(ts[20:26])  # type: ignore[index]
                    if t_us > pos.last_us:
                        pos.last_us = t_us
                else:
                    got = self._take(stream, pos, line + b"\n", at)
                    if got is None:
                        continue
                    text, t_us = got
                start = fixed if fixed is not None else self._start_of(stream, pos, text, t_us)
                if since is not None and t_us < since:
                    continue
                n += 1
                self._realtime = t_us
                if start == self._current:
                    yield text
                else:
                    self._read_any = True
                    self._current = start
                    yield JournalEntry(
                        unit=unit,
                        message=clean_message(text),
                        realtime_us=t_us,
                        invocation_id=start,
                    )
                if left is not None and n >= left:
                    return n
            if whole == len(data):
                pos.buf = None  # the block is used up: the next read follows on
        return n

    def _take(
        self, stream: Stream, pos: _Position, line: bytes, at: int
    ) -> tuple[bytes, int] | None:
        """(text, time) of a line the fast path of _read_file does not cut apart: any form, a
        piece of a split line, after a restart or a lost position; None when nothing is
        handed out for it (a piece held, a line handed out before, a corrupt line)."""
        got = self._parse(stream.fmt, line)
        if got is None and b"\0" in line:
            # A hole of NUL bytes where a host crash lost the end of the file (the size was
            # written, the data not): the engine appended after it, so the record past the
            # last NUL is whole (a JSON record has none of its own: moby/moby#53631).
            got = self._parse(stream.fmt, line[line.rfind(b"\0") + 1 :])
        if got is None:
            self.corrupt_reads += 1
            return None
        text, t_us, out, partial = got
        if pos.skip_us:
            if t_us <= pos.skip_us:
                return None
            pos.skip_us = 0
        if pos.replay_until:
            if at >= pos.replay_until:
                pos.replay_until, pos.replay = 0, {}
            elif at < pos.replay.get(out, pos.replay_until):
                return None  # handed out before the restart (or a piece of such a line)
        held = pos.pieces.get(out)
        if partial:
            if held is None:
                pos.pieces[out] = [bytearray(text[:MAX_LINE_BYTES]), at, t_us]
            elif len(held[0]) < MAX_LINE_BYTES:
                held[0] += text[: MAX_LINE_BYTES - len(held[0])]
            return None
        # The time of the last record of the line: a position lost is found again after it
        # (the skip above), never in the middle of a split line.
        pos.last_us = max(pos.last_us, t_us)
        if held is not None:
            del pos.pieces[out]
            held[0] += text[: max(MAX_LINE_BYTES - len(held[0]), 0)]
            text, t_us = bytes(held[0]), held[2]
        return text, t_us

    def _parse(self, fmt: LineFormat, line: bytes) -> tuple[bytes, int, bytes, bool] | None:
        """(text, time, output, partial) of a line, None when it is not the layout's format."""
        parsed = _parse_docker(line) if fmt == "docker" else _parse_cri(line)
        if parsed is None:
            return None
        text, ts, out, partial = parsed
        t_us = parse_time_us(ts, self._time_cache)
        return None if t_us is None else (text, t_us, out, partial)

    @staticmethod
    def _start_of(stream: Stream, pos: _Position, text: bytes, t_us: int) -> str:
        """The start a line belongs to. A fixed one (a pod's N.log); else a container's lines
        open a start at their first line and at each `server_args=` line after the one of the
        start before (SGLang prints one per process start; the json-file log keeps no mark of
        a restart), as the tracker does for a journal without invocation ids."""
        if stream.start is not None:
            return stream.start
        if pos.start is None:
            pos.start = start_id(stream.seed, t_us)
            pos.args_seen = False
        if b"server_args=" in text:
            if pos.args_seen:
                pos.start = start_id(stream.seed, t_us)
            pos.args_seen = True
        return pos.start

    def _refresh_fingerprint(self, pos: _Position) -> None:
        """The file has grown past what its fingerprint covers: cover its first line now."""
        if pos.fh is None or pos.offset <= pos.fplen:
            return
        try:
            head = _first_line(os.pread(pos.fh.fileno(), FINGERPRINT_BYTES, 0))
        except OSError:
            return
        pos.fp, pos.fplen, pos.fp_whole = _fingerprint(head), len(head), _whole(head)

    @staticmethod
    def _close_file(pos: _Position) -> None:
        pos.buf = None
        if pos.fh is not None:
            with contextlib.suppress(OSError):
                pos.fh.close()
            pos.fh = None

    # -- the position ---------------------------------------------------------------------------

    def realtime_us(self) -> int:
        return self._realtime

    def monotonic(self) -> tuple[int, str] | None:
        return None  # a log file has no monotonic clock; durations use the line times

    def cursor(self) -> str | None:
        """Every stream's position, as JSON (None before anything was positioned)."""
        forgotten = self._forgotten(self._positions, {s.key for s in self._streams})
        saved = {
            key: pos.saved()
            for key, pos in self._positions.items()
            if (pos.found or pos.fp) and key not in forgotten
        }
        if not saved:
            return None
        return json.dumps({"v": CURSOR_VERSION, "s": saved}, separators=(",", ":"))

    @staticmethod
    def _forgotten(positions: Mapping[str, _Position], live: set[str]) -> set[str]:
        """The positions neither memory nor the cursor keeps: of streams not listed now (and
        no file open), those with nothing to save and all but the POSITIONS_KEPT newest by
        their last line's time. Gone streams only get older, so forgetting them early (in
        memory) or late (in the cursor) forgets the same ones."""
        gone = [
            (pos.last_us, key)
            for key, pos in positions.items()
            if key not in live and pos.fh is None
        ]
        empty = {key for _t, key in gone if not (positions[key].found or positions[key].fp)}
        if len(gone) - len(empty) <= POSITIONS_KEPT:
            return empty
        saveable = sorted((item for item in gone if item[1] not in empty), reverse=True)
        return empty | {key for _t, key in saveable[POSITIONS_KEPT:]}

    @property
    def partial_pending(self) -> bool:
        """Pieces of a split line read but not handed out (the position stays before them)."""
        return any(pos.pieces for pos in self._positions.values())


_DOCKER_HEAD = b'{"log":"'
_DOCKER_STREAM = b'","stream":"'
_DOCKER_TIME = b'","time":"'
_SURROGATE = re.compile("[\ud800-\udc7f\udd00-\udfff]")


def _less(left: int | None, n: int) -> int | None:
    return None if left is None else left - n


def _parse_docker(line: bytes) -> tuple[bytes, bytes, bytes, bool] | None:
    """(text, time, output, partial) of a json-file line; a piece of a split line lacks the
    newline.

    moby writes the three fields in this order without spaces; a line whose text has no JSON
    escape but its final newline (most of them) is cut apart without a JSON parser."""
    if line.startswith(_DOCKER_HEAD) and line.endswith(b'"}\n'):
        cut = line.rfind(_DOCKER_STREAM)
        when = line.rfind(_DOCKER_TIME)
        if 8 <= cut < when:
            body = line[8:cut]
            partial = not body.endswith(b"\\n")
            if not partial:
                body = body[:-2]
            if b"\\" not in body and b'"' not in body:
                return body, line[when + 10 : -3], line[cut + 12 : when], partial
    try:
        obj = json.loads(line)
        text = obj["log"]
        ts = obj["time"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(text, str) or not isinstance(ts, str):
        return None
    out = obj.get("stream")
    output = out.encode() if isinstance(out, str) else b""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        # An escaped lone surrogate (`\ud800`; moby writes none, another writer may): not
        # text: read as U+FFFD, as an invalid byte is (surrogateescape keeps \udc80-\udcff).
        raw = _SURROGATE.sub("\ufffd", text).encode("utf-8", "surrogateescape")
    if raw.endswith(b"\n"):
        return raw[:-1], ts.encode(), output, False
    return raw, ts.encode(), output, True


def _parse_cri(line: bytes) -> tuple[bytes, bytes, bytes, bool] | None:
    """(text, time, output, partial) of a CRI line: `<time> <stream> <P|F>[:tags] <text>`."""
    parts = line[:-1].split(b" ", 3) if line.endswith(b"\n") else line.split(b" ", 3)
    if len(parts) < 3:
        return None
    ts, output, tag = parts[0], parts[1], parts[2]
    text = parts[3] if len(parts) == 4 else b""
    flag = tag.split(b":", 1)[0]
    if flag not in (b"P", b"F"):
        return None
    return text, ts, output, flag == b"P"


def _boot_time() -> float:
    try:
        with open("/proc/stat", "rb") as fh:
            for line in fh:
                if line.startswith(b"btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return time.time() - time.monotonic()
