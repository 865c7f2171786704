"""Linux inotify through ctypes: the file sources' wake-up, with no polling and no dependency.

One instance (one fd, readable when a watched directory changes) per file source; the daemon
polls that fd beside its signal pipe, as it polls the journal's. Only directories are watched:
an event on a directory names the file it is about, and a renamed or recreated file is seen
through its directory (a watch on the file itself would follow the renamed inode).
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
from pathlib import Path
from typing import Final

from ..errors import SentinelError

IN_MODIFY: Final = 0x00000002
IN_ATTRIB: Final = 0x00000004
IN_CLOSE_WRITE: Final = 0x00000008
IN_MOVED_FROM: Final = 0x00000040
IN_MOVED_TO: Final = 0x00000080
IN_CREATE: Final = 0x00000100
IN_DELETE: Final = 0x00000200
IN_DELETE_SELF: Final = 0x00000400
IN_MOVE_SELF: Final = 0x00000800
IN_Q_OVERFLOW: Final = 0x00004000
IN_IGNORED: Final = 0x00008000
IN_ONLYDIR: Final = 0x01000000
IN_NONBLOCK: Final = os.O_NONBLOCK
IN_CLOEXEC: Final = os.O_CLOEXEC

# What a watched log directory reports: a file written, created, renamed, removed.
DIR_EVENTS: Final = (
    IN_MODIFY
    | IN_CLOSE_WRITE
    | IN_ATTRIB
    | IN_CREATE
    | IN_DELETE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
)
# Events that change which files exist (the layout is listed again); IN_MODIFY only adds lines.
LAYOUT_EVENTS: Final = (
    IN_CREATE
    | IN_DELETE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_Q_OVERFLOW
    | IN_IGNORED
    | IN_ATTRIB
    | IN_CLOSE_WRITE
)

_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (struct inotify_event)


class InotifyError(SentinelError):
    """inotify could not be set up (no instances or watches left, not Linux)."""


def _libc() -> ctypes.CDLL:
    # The process's own symbols (libc among them); ctypes.util.find_library would run ldconfig.
    return ctypes.CDLL(None, use_errno=True)


class Inotify:
    """One inotify instance: directory watches and the events read from its fd."""

    def __init__(self) -> None:
        self._libc = _libc()
        fd = self._libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise InotifyError(
                f"cannot watch log files: inotify_init1: {os.strerror(err)}"
                + (
                    " (raise fs.inotify.max_user_instances)"
                    if err in (errno.EMFILE, errno.ENFILE)
                    else ""
                )
            )
        self._fd: int = fd
        self._paths: dict[int, Path] = {}
        self._wds: dict[Path, int] = {}

    def fileno(self) -> int:
        return self._fd

    def watch(self, path: Path, mask: int = DIR_EVENTS) -> bool:
        """Watch the directory `path` (again: a no-op); False when it does not exist (now)."""
        if path in self._wds:
            return True
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(path), mask)
        if wd < 0:
            err = ctypes.get_errno()
            if err in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
                return False
            raise InotifyError(
                f"cannot watch {path}: {os.strerror(err)}"
                + (" (raise fs.inotify.max_user_watches)" if err == errno.ENOSPC else "")
            )
        self._paths[wd] = path
        self._wds[path] = wd
        return True

    def unwatch(self, path: Path) -> None:
        wd = self._wds.pop(path, None)
        if wd is not None:
            self._paths.pop(wd, None)
            self._libc.inotify_rm_watch(self._fd, wd)

    @property
    def watched(self) -> frozenset[Path]:
        return frozenset(self._wds)

    def read(self) -> list[tuple[Path | None, int, str]]:
        """The events queued now, as (watched directory, mask, file name); never blocks."""
        events: list[tuple[Path | None, int, str]] = []
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return events
            if not data:
                return events
            pos = 0
            while pos + _HEADER.size <= len(data):
                wd, mask, _cookie, length = _HEADER.unpack_from(data, pos)
                pos += _HEADER.size
                name = data[pos : pos + length].rstrip(b"\0")
                pos += length
                path = self._paths.get(wd)
                if mask & IN_IGNORED and path is not None:
                    # The directory is gone (or unwatched): forget the watch descriptor.
                    self._paths.pop(wd, None)
                    self._wds.pop(path, None)
                events.append((path, mask, os.fsdecode(name)))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            self._paths.clear()
            self._wds.clear()
