"""The state directory's files, opened without following links.

The state directory belongs to the daemon's user, and root runs commands in it too (`sentinel
baseline --pin`, `scan`). SQLite follows a symbolic link at the database's path (and puts the
-wal/-shm files beside the link's target), so a link planted there made root create a file
where it pointed, or turned another application's SQLite file into the sentinel's (its tables,
WAL mode and a chmod). Before SQLite opens anything, each of the database, its -wal and its
-shm is looked at with O_NOFOLLOW relative to the directory: a link, anything but a regular
file, a file of another owner than this user or the directory's, a world-writable file or one
with several hard links is refused with one line. The database file is created here
(O_CREAT|O_EXCL|O_NOFOLLOW), never by SQLite. The directory itself may be a link (systemd's
DynamicUser= makes /var/lib/NAME one).

What is left: the directory's owner can still swap a file for a link between this look and
SQLite's open. `verify` looks again once SQLite has opened them and refuses what changed.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from ..errors import StateError

# SQLite's companions of a WAL database (sqlite.org/wal.html, "the WAL file" and "the wal-index").
COMPANIONS = ("-wal", "-shm")
# The database's mode (its group reads it: `sentinel check` as a member of the state's group).
DB_MODE = 0o640


def _owner(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _problem(name: str, st: os.stat_result, allowed: set[int]) -> str | None:
    """What is wrong with the file `name` whose lstat is `st`, or None."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link; the sentinel does not follow links in its state directory"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_uid not in allowed:
        return f"belongs to {_owner(st.st_uid)}, not to this user or the state directory's owner"
    if st.st_mode & stat.S_IWOTH:
        return f"is writable by every user (mode {stat.S_IMODE(st.st_mode):04o})"
    if st.st_nlink != 1:
        return f"has {st.st_nlink} hard links (another name elsewhere shares the file)"
    return None


class StateFiles:
    """The database and its companions in one state directory, looked at without following links."""

    def __init__(self, state_dir: Path, db_name: str) -> None:
        self.state_dir = state_dir
        self.names = (db_name, *(db_name + suffix for suffix in COMPANIONS))

    def check(self, *, create: bool) -> tuple[int, int] | None:
        """Refuse (StateError) a link or a foreign file among the state's files; with `create`,
        make a missing database (mode DB_MODE). Returns the database's (st_dev, st_ino), None
        when it does not exist."""
        try:
            # O_PATH: looking needs only search permission on the directory, as stat() does.
            dirfd = os.open(self.state_dir, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None  # the callers say "no state in DIR" or create the directory first
        except PermissionError:
            # A parent this user may not search (DynamicUser's /var/lib/private is 0700):
            # SQLite cannot open anything in it either; the callers' own open says so.
            return None
        try:
            allowed = {os.geteuid(), os.fstat(dirfd).st_uid}
            if create:
                self._create(dirfd)
            identity = None
            for name in self.names:
                try:
                    st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                except (FileNotFoundError, PermissionError):
                    continue  # absent, or out of this user's sight: SQLite cannot open it either
                why = _problem(name, st, allowed)
                if why is not None:
                    raise StateError(self._refusal(name, why, dirfd))
                if name == self.names[0]:
                    identity = (st.st_dev, st.st_ino)
            return identity
        finally:
            os.close(dirfd)

    def verify(self, identity: tuple[int, int] | None) -> None:
        """After SQLite opened the files: the same database, and still no link among them."""
        now = self.check(create=False)
        if now is None or (identity is not None and now != identity):
            raise StateError(
                f"state database {self.state_dir / self.names[0]} was replaced while it was "
                "being opened; refusing it (who else writes the state directory?)"
            )

    def set_mode(self) -> None:
        """chmod the database to DB_MODE through a descriptor opened without following links.

        Only before SQLite opens the database in this process: closing that descriptor drops
        every POSIX lock the process holds on the file, SQLite's included (fcntl(2)), and a WAL
        database whose shared lock is gone has its -wal deleted by the next other process that
        closes it."""
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        with contextlib.suppress(OSError):
            st = os.stat(self.state_dir / self.names[0], follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == DB_MODE:
                return  # nothing to change, so no descriptor to open and close
            fd = os.open(self.state_dir / self.names[0], flags)
            try:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    os.fchmod(fd, DB_MODE)
            finally:
                os.close(fd)

    def _create(self, dirfd: int) -> None:
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(self.names[0], flags, DB_MODE, dir_fd=dirfd)
        except FileExistsError:
            return  # there already (a dangling link included: looked at next)
        os.close(fd)

    def _refusal(self, name: str, why: str, dirfd: int) -> str:
        path = self.state_dir / name
        target = ""
        with contextlib.suppress(OSError):
            target = f" (-> {os.readlink(name, dir_fd=dirfd)})"
        return (
            f"state file {path}{target} {why}; refusing to open it: remove or replace it "
            "(`mv` it aside) and run the command again"
        )
