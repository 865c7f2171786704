"""State: startup records, pinned baselines and the journal cursor in SQLite.

Comparisons are not stored: every reader makes them from the records when it reads them (the
daemon after each commit, the CLI per command), against the baseline pinned at that moment.

Everything derived from the entries before a cursor is committed in the same transaction as the
cursor, so a crash at any moment loses nothing and repeats nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
import urllib.parse
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import StateError, UsageError
from ..model import StartupRecord
from .codec import record_from_json, record_to_json
from .files import StateFiles

# 1: the first schema. 2: startups.seq (journal order, so a wrong wall clock cannot reorder
# startups) and the startups_total counters (they never go down when an outcome changes).
# 3: no comparisons table (written on every save, read back only to tell a new startup and
# what was logged; it went stale once batch lines stopped re-comparing a startup).
# 4: resume state by reader (source and target list): the builders table, cursors keyed by the
# same; startups.builder is no longer written (see _upgrade_to_4).
SCHEMA_VERSION = 4
# The oldest schema this code reads as it is (a read-only command on a version 2 database only
# sees an extra table it ignores); older ones are upgraded first.
READABLE_SCHEMA = 2
DB_NAME = "sentinel.sqlite3"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS startups (
    invocation_id TEXT PRIMARY KEY,
    unit TEXT NOT NULL,
    started_at REAL NOT NULL,
    outcome TEXT NOT NULL,
    record TEXT NOT NULL,
    builder TEXT,
    updated_at REAL NOT NULL,
    seq INTEGER
);
CREATE INDEX IF NOT EXISTS startups_unit_time ON startups (unit, started_at);
CREATE TABLE IF NOT EXISTS baselines (
    unit TEXT PRIMARY KEY,
    invocation_id TEXT NOT NULL REFERENCES startups (invocation_id),
    pinned_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS cursors (
    source TEXT PRIMARY KEY,
    cursor TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS builders (
    owner TEXT NOT NULL,
    invocation_id TEXT NOT NULL REFERENCES startups (invocation_id),
    unit TEXT NOT NULL,
    state TEXT NOT NULL,
    PRIMARY KEY (owner, invocation_id)
);
CREATE TABLE IF NOT EXISTS pruned (
    invocation_id TEXT PRIMARY KEY,
    unit TEXT NOT NULL,
    seq INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS pruned_unit_seq ON pruned (unit, seq);
CREATE TABLE IF NOT EXISTS pruned_horizon (unit TEXT PRIMARY KEY, started_at REAL NOT NULL);
"""
# The `pruned` table (retention's tombstones) and `pruned_horizon` (per unit, the start of the
# newest startup retention deleted) came without a schema version: an older sentinel ignores a
# table it does not know, and only writers (which create them) read them.

# Tombstones of pruned startups kept per unit, as a multiple of the startups kept: a scan that
# reads those startups' lines again skips them instead of storing them as new.
PRUNED_KEPT_FACTOR = 10


class _Savepoint:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self.done = False

    def rollback(self) -> None:
        self._db.execute("ROLLBACK TO one_record")
        self._db.execute("RELEASE one_record")
        self.done = True


class StateStore:
    """One SQLite database in the state directory."""

    def __init__(
        self, state_dir: Path, *, readonly: bool = False, busy_timeout: float = 10.0
    ) -> None:
        self.path = state_dir / DB_NAME
        self.readonly = readonly
        self._files = StateFiles(state_dir, DB_NAME)
        if readonly:
            identity = self._files.check(create=False)
            self._db = self._open_readonly(state_dir)
            try:
                self._refuse_newer()  # before anything that assumes this schema's tables
                self._check_readable()
                outdated = self._version() < READABLE_SCHEMA
            except sqlite3.DatabaseError as exc:
                raise StateError(broken_database(self.path, exc)) from exc
            if outdated:
                # An older state read before the daemon upgraded it: upgrade it in place when
                # this user may write it (e.g. root), else say who can.
                if not os.access(self.path, os.W_OK) or not os.access(state_dir, os.W_OK):
                    raise StateError(
                        f"state database {self.path} has an older schema and this user may"
                        " not upgrade it; restart the sentinel (or run this command once as"
                        " its user or root)"
                    )
                self._db.close()
                StateStore(state_dir, busy_timeout=busy_timeout).close()
                identity = self._files.check(create=False)
                self._db = self._open_readonly(state_dir)
            self._opened(identity)
            return
        try:
            state_dir.mkdir(parents=True, exist_ok=True, mode=0o750)
            # The database is created here, without following a link; SQLite only opens it.
            identity = self._files.check(create=True)
            if self.path.exists() and not os.access(self.path, os.R_OK | os.W_OK):
                raise StateError(
                    f"state database {self.path} is not writable by this user; run the command"
                    " as the sentinel's user (or root), or pass --state-dir or set"
                    " SENTINEL_STATE_DIR"
                )
            # Before SQLite opens the file: closing a descriptor of it (the chmod's) would drop
            # every POSIX lock this process holds on it, SQLite's shared lock on a WAL database
            # included; another process closing its connection then took itself for the last
            # one and deleted the -wal under us, and every later commit went to nowhere.
            self._files.set_mode()
            # check_same_thread=False: scrape threads share it under the collector's lock.
            self._db = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
            self._check_readable()
            self._opened(identity)
        except PermissionError as exc:
            raise StateError(
                f"state directory {state_dir} is not writable ({exc.strerror}); "
                "pass --state-dir or set SENTINEL_STATE_DIR"
            ) from exc
        except sqlite3.DatabaseError as exc:
            raise StateError(broken_database(self.path, exc)) from exc
        except sqlite3.Error as exc:
            raise StateError(f"cannot use state database {self.path}: {exc}") from exc
        except OSError as exc:
            raise StateError(
                f"cannot use state directory {state_dir}: {exc.strerror or exc}"
            ) from exc

    def _opened(self, identity: tuple[int, int] | None) -> None:
        """SQLite has the files open: refuse them (and close) if one became a link meanwhile."""
        try:
            self._files.verify(identity)
        except StateError:
            self._db.close()
            raise
        st = os.stat(self.path, follow_symlinks=False)
        self._identity = (st.st_dev, st.st_ino)

    def _open_readonly(self, state_dir: Path) -> sqlite3.Connection:
        """Open for reading only (`startups`, `check`, `diff`, `baseline`): needs read access to
        the database and nothing else; never creates or changes a file."""
        unreadable = (
            "is not readable by this user; run the command as a member of the state's group"
            " (or root), or pass --state-dir or set SENTINEL_STATE_DIR"
        )
        try:
            exists = self.path.exists()
        except PermissionError:
            raise StateError(f"state directory {state_dir} {unreadable}") from None
        if not exists:
            raise StateError(
                f"no state in {state_dir} (run `sentinel scan` or `sentinel run` first)"
            )
        if not os.access(self.path, os.R_OK):
            raise StateError(f"state database {self.path} {unreadable}")
        base = "file:" + urllib.parse.quote(str(self.path.absolute())) + "?mode=ro"
        try:
            return self._connect_ro(base)
        except sqlite3.OperationalError as exc:
            # A WAL database needs its -shm (wal-index) to be read; SQLite creates it when it is
            # missing, which a directory we may not write forbids. Without a -wal file no writer
            # holds changes outside the main file (the last one to close checkpointed them), so
            # the main file alone is the whole state: read it as immutable.
            if Path(f"{self.path}-wal").exists():
                raise StateError(
                    f"cannot read state database {self.path} while it is being written: {exc};"
                    f" {state_dir} or its -shm file must be writable by this user"
                ) from exc
            try:
                return self._connect_ro(base + "&immutable=1")
            except sqlite3.DatabaseError as exc2:
                raise StateError(broken_database(self.path, exc2)) from exc2
        except sqlite3.DatabaseError as exc:
            raise StateError(broken_database(self.path, exc)) from exc

    @staticmethod
    def _connect_ro(uri: str) -> sqlite3.Connection:
        db = sqlite3.connect(uri, uri=True, timeout=10, isolation_level=None)
        try:
            db.execute("PRAGMA foreign_keys=ON")
            # Opening is lazy: read the schema now so a failure surfaces here.
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except BaseException:
            db.close()
            raise
        return db

    def close(self) -> None:
        if not self.readonly:
            self._leave_wal()
        self._db.close()

    def _leave_wal(self) -> None:
        """The last writer to close takes the database out of WAL mode (checkpointing it), so
        that no -wal/-shm files are left and a read-only command (which opens `mode=ro` and
        cannot remove them) creates none: SQLite makes both files for any reader of a WAL
        database whose directory it may write. A writer that is not the last one (a scan beside
        the daemon) gets SQLITE_BUSY at once and leaves WAL mode on; the next writer sets it."""
        with contextlib.suppress(sqlite3.Error):
            self._db.execute("PRAGMA busy_timeout=0")
            self._db.execute("PRAGMA journal_mode=DELETE")

    def _check_readable(self) -> None:
        """A database that is empty (zero length, never written) or fails SQLite's quick check
        is refused up front with a recovery hint, not at the first query with a traceback."""
        row = self._db.execute(
            "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='startups'"
        ).fetchone()
        if not row[0]:
            raise StateError(
                f"state database {self.path} is empty (zero length or never written); "
                "run `sentinel scan` or `sentinel run` to create it, or move it aside"
            )
        verdict = self._db.execute("PRAGMA quick_check(1)").fetchone()
        if verdict is None or verdict[0] != "ok":
            detail = verdict[0] if verdict else "no answer"
            raise sqlite3.DatabaseError(f"quick_check: {detail}")

    def check_file(self) -> None:
        """Raise StateError when the database file was deleted or replaced under us: writes
        would go to an unlinked file that nothing else can see and that is lost on stop."""
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            raise StateError(
                f"state database {self.path} was deleted while the sentinel ran; stopping so "
                "that a restart re-creates it (startups are read again from the journal; pin "
                "baselines again)"
            ) from None
        if (st.st_dev, st.st_ino) != self._identity:
            raise StateError(
                f"state database {self.path} was replaced while the sentinel ran; stopping so "
                "that a restart opens the new file"
            )

    def _migrate(self) -> None:
        with self.transaction():
            self._refuse_newer()
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    self._db.execute(stmt)
            row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None:
                self._db.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )
            else:
                version = self._version()
                if version < 2:
                    self._upgrade_to_2()
                if version < 3:
                    self._upgrade_to_3()
                if version < 4:
                    self._upgrade_to_4()
            self._db.execute("CREATE INDEX IF NOT EXISTS startups_unit_seq ON startups (unit, seq)")

    def _refuse_newer(self) -> None:
        """A state a newer sentinel wrote is refused by every command, reading or writing, in
        one line that says so (its tables may not be what this code reads)."""
        has_meta = self._db.execute(
            "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='meta'"
        ).fetchone()[0]
        version = self._version() if has_meta else 0
        if version > SCHEMA_VERSION:
            raise StateError(
                f"state database {self.path} has schema version {version}, newer than this"
                f" sentinel understands ({SCHEMA_VERSION}); upgrade sglang-sentinel (or move"
                " the state aside to start a new one)"
            )

    def _version(self) -> int:
        row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            return 0
        try:
            return int(row[0])
        except (TypeError, ValueError):
            # A damaged state (edited by hand, another program's table): said in one line.
            raise StateError(
                f"state database {self.path} has no readable schema version ({str(row[0])[:40]!r});"
                " move the state aside to start a new one"
            ) from None

    def _upgrade_to_2(self) -> None:
        """Version 1 -> 2: number the startups in the order version 1 knew them by (their start
        time: the best there is for what is already stored), and seed the startups_total
        counters from the stored outcomes."""
        db = self._db
        columns = {r[1] for r in db.execute("PRAGMA table_info(startups)")}
        if "seq" not in columns:
            db.execute("ALTER TABLE startups ADD COLUMN seq INTEGER")
        rows = db.execute("SELECT invocation_id FROM startups ORDER BY started_at, invocation_id")
        db.executemany(
            "UPDATE startups SET seq=? WHERE invocation_id=?",
            [(n, inv) for n, (inv,) in enumerate(rows.fetchall(), 1)],
        )
        db.execute(
            "INSERT INTO counters (name, value)"
            " SELECT 'startups_total:' || outcome || ':' || unit, count(*) FROM startups"
            " WHERE outcome IN ('ready', 'failed') GROUP BY unit, outcome"
            " ON CONFLICT (name) DO UPDATE SET value=excluded.value"
        )
        db.execute("UPDATE meta SET value='2' WHERE key='schema_version'")

    def _upgrade_to_3(self) -> None:
        """Version 2 -> 3: drop the comparisons table (nothing reads it any more)."""
        self._db.execute("DROP TABLE IF EXISTS comparisons")
        self._db.execute("UPDATE meta SET value='3' WHERE key='schema_version'")

    def _upgrade_to_4(self) -> None:
        """Version 3 -> 4: the open startups' resume state moves to the builders table, owned
        by the reader that saved it. Version 3 kept one cursor per journal source and one
        builder per startup for whoever read last; they become the source's legacy state,
        which the first reader of that source to resume takes over (`adopt_legacy`)."""
        db = self._db
        sources = [str(r[0]) for r in db.execute("SELECT source FROM cursors")]
        for source in sources:
            db.execute(
                "INSERT OR IGNORE INTO builders (owner, invocation_id, unit, state)"
                " SELECT ?, invocation_id, unit, builder FROM startups WHERE builder IS NOT NULL",
                (source,),
            )
        # Without a cursor the next reading starts at the beginning and derives them afresh.
        db.execute("UPDATE startups SET builder=NULL WHERE builder IS NOT NULL")
        db.execute("UPDATE meta SET value='4' WHERE key='schema_version'")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """BEGIN IMMEDIATE ... COMMIT; rolls back on any exception, a failed COMMIT included.

        SQLite may have rolled back already (SQLITE_FULL, SQLITE_IOERR): the ROLLBACK is then
        skipped, and its own failure never hides the error that caused it.
        """
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
            raise

    @contextmanager
    def savepoint(self) -> Iterator[_Savepoint]:
        """A nested part of a transaction that can be undone alone (`.rollback()`)."""
        self._db.execute("SAVEPOINT one_record")
        sp = _Savepoint(self._db)
        try:
            yield sp
        except BaseException:
            if not sp.done and self._db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK TO one_record")
                    self._db.execute("RELEASE one_record")
            raise
        if not sp.done:
            self._db.execute("RELEASE one_record")

    # -- writing (call inside transaction()) ----------------------------------------------------

    def save_startup(
        self, record: StartupRecord, builder: str | None, owner: str | None = None
    ) -> bool | None:
        """Insert or update one startup: True when it is new, False when it was updated, None
        when the stored record was kept because `record` is weaker (`weaker_than_stored`).

        `builder` is the startup's resume state as `owner` (a reader: journal source and target
        list, `pipeline.source_key`) read it; it is kept for that owner only, so readers that
        share a state never resume from each other's (without an owner it is not stored).

        A new one is numbered after every stored one (`seq`): the pipeline stores startups in
        journal order, so `seq` is the journal's order and the wall clock (`started_at`) never
        decides which startup is the latest.

        The first time a startup is stored as ready or failed counts in startups_total, once:
        a counter that never goes down when a later line changes the outcome.
        """
        row = self._db.execute(
            "SELECT outcome, started_at, record FROM startups WHERE invocation_id=?",
            (record.invocation_id,),
        ).fetchone()
        result: bool | None
        if row is not None and weaker_than_stored(record, str(row[0]), float(row[1]), row[2]):
            result = None
        else:
            decided = ("ready", "failed")
            if record.outcome in decided and (row is None or row[0] not in decided):
                self.add_counter(f"startups_total:{record.outcome}:{record.unit}")
            self._db.execute(
                "INSERT INTO startups"
                " (invocation_id, unit, started_at, outcome, record, builder, updated_at, seq)"
                " VALUES (?, ?, ?, ?, ?, NULL, ?,"
                " (SELECT coalesce(max(seq), 0) + 1 FROM startups))"
                " ON CONFLICT (invocation_id) DO UPDATE SET unit=excluded.unit,"
                " started_at=excluded.started_at, outcome=excluded.outcome,"
                " record=excluded.record, updated_at=excluded.updated_at",
                (
                    record.invocation_id,
                    record.unit,
                    record.started_at,
                    record.outcome,
                    record_to_json(record),
                    time.time(),
                ),
            )
            result = row is None
        if builder is not None and owner is not None:
            self._db.execute(
                "INSERT INTO builders (owner, invocation_id, unit, state) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (owner, invocation_id) DO UPDATE SET state=excluded.state",
                (owner, record.invocation_id, record.unit, builder),
            )
        return result

    def prune(self, unit: str, keep: int) -> int:
        """Delete the unit's startups older than its newest `keep`; returns how many.

        Always kept: the pinned baseline, the newest ready startup (the next startup's
        "previous" baseline, however long a crash loop since), and startups still open. A
        pruned startup leaves a tombstone (`is_pruned`) so reading its lines again does not
        store it anew; the tombstones are bounded too (PRUNED_KEPT_FACTOR * keep per unit), so
        the unit's horizon, the start of the newest startup ever deleted, is kept as well: a
        startup not stored that began before it was pruned too, whether or not its tombstone
        is left (a crash loop of more than PRUNED_KEPT_FACTOR * keep startups read again).
        """
        db = self._db
        (stored,) = db.execute("SELECT count(*) FROM startups WHERE unit=?", (unit,)).fetchone()
        if stored <= keep:
            return 0
        cut = db.execute(
            "SELECT seq FROM startups WHERE unit=? ORDER BY seq DESC LIMIT 1 OFFSET ?",
            (unit, keep - 1),
        ).fetchone()
        victims = (
            " FROM startups WHERE unit=:unit AND seq < :cut"
            " AND invocation_id NOT IN (SELECT invocation_id FROM builders)"
            " AND invocation_id NOT IN (SELECT invocation_id FROM baselines)"
            " AND invocation_id IS NOT (SELECT invocation_id FROM startups"
            "  WHERE unit=:unit AND outcome='ready' ORDER BY seq DESC LIMIT 1)"
        )
        where = {"unit": unit, "cut": cut[0]}
        db.execute(
            "INSERT OR REPLACE INTO pruned (invocation_id, unit, seq)"
            " SELECT invocation_id, unit, seq" + victims,
            where,
        )
        db.execute(
            "INSERT INTO pruned_horizon (unit, started_at)"
            " SELECT :unit, max(started_at)" + victims + " GROUP BY unit"  # none: no row
            " ON CONFLICT (unit) DO UPDATE SET"
            " started_at=max(started_at, excluded.started_at)",
            where,
        )
        deleted = db.execute("DELETE" + victims, where).rowcount
        db.execute(
            "DELETE FROM pruned WHERE unit=:unit AND seq < coalesce((SELECT seq FROM pruned"
            " WHERE unit=:unit ORDER BY seq DESC LIMIT 1 OFFSET :n), -9e18)",
            {"unit": unit, "n": keep * PRUNED_KEPT_FACTOR - 1},
        )
        return int(deleted)

    def is_pruned(self, record: StartupRecord) -> bool:
        """True when retention deleted this startup (see `prune`): its tombstone is there, or
        it is not stored and began no later than the newest startup of its unit deleted."""
        db = self._db
        inv = record.invocation_id
        if db.execute("SELECT 1 FROM pruned WHERE invocation_id=?", (inv,)).fetchone():
            return True
        horizon = db.execute(
            "SELECT started_at FROM pruned_horizon WHERE unit=?", (record.unit,)
        ).fetchone()
        if horizon is None or record.started_at > float(horizon[0]):
            return False
        stored = db.execute("SELECT 1 FROM startups WHERE invocation_id=?", (inv,)).fetchone()
        return stored is None

    def clear_builders(self, owner: str, keep: Iterable[str]) -> None:
        """Drop `owner`'s resume state of startups that can no longer change (another reader's
        stays: it is that reader's to clear)."""
        keep = list(keep)
        marks = ",".join("?" * len(keep))
        self._db.execute(
            f"DELETE FROM builders WHERE owner=? AND invocation_id NOT IN ({marks})",
            [owner, *keep],
        )

    def adopt_legacy(self, legacy: str, owner: str) -> bool:
        """Make the cursor and builders a version-3 state saved under the journal source
        `legacy` alone `owner`'s (the first reader of that source to resume after the upgrade);
        True when there was such a cursor."""
        with self.transaction():
            if self.cursor(legacy) is None or self.cursor(owner) is not None:
                return False
            self._db.execute("UPDATE cursors SET source=? WHERE source=?", (owner, legacy))
            self._db.execute(
                "UPDATE OR REPLACE builders SET owner=? WHERE owner=?", (owner, legacy)
            )
        return True

    def save_cursor(self, source: str, cursor: str) -> None:
        self._db.execute(
            "INSERT INTO cursors (source, cursor, updated_at) VALUES (?, ?, ?)"
            " ON CONFLICT (source) DO UPDATE SET cursor=excluded.cursor, updated_at=excluded.updated_at",
            (source, cursor, time.time()),
        )

    def add_counter(self, name: str, delta: int = 1) -> None:
        self._db.execute(
            "INSERT INTO counters (name, value) VALUES (?, ?)"
            " ON CONFLICT (name) DO UPDATE SET value = value + excluded.value",
            (name, delta),
        )

    def pin(self, unit: str, invocation_id: str) -> None:
        with self.transaction():
            self._db.execute(
                "INSERT INTO baselines (unit, invocation_id, pinned_at) VALUES (?, ?, ?)"
                " ON CONFLICT (unit) DO UPDATE SET invocation_id=excluded.invocation_id,"
                " pinned_at=excluded.pinned_at",
                (unit, invocation_id, time.time()),
            )

    def unpin(self, unit: str) -> bool:
        with self.transaction():
            cur = self._db.execute("DELETE FROM baselines WHERE unit=?", (unit,))
        return cur.rowcount > 0

    # -- reading ----------------------------------------------------------------------------------

    def cursor(self, source: str) -> str | None:
        row = self._db.execute("SELECT cursor FROM cursors WHERE source=?", (source,)).fetchone()
        return str(row[0]) if row else None

    def counter(self, name: str) -> int:
        row = self._db.execute("SELECT value FROM counters WHERE name=?", (name,)).fetchone()
        return int(row[0]) if row else 0

    def open_builders(self, owner: str) -> list[str]:
        """`owner`'s resume state of its open startups, in journal order."""
        rows = self._db.execute(
            "SELECT b.state FROM builders b JOIN startups s USING (invocation_id)"
            " WHERE b.owner=? ORDER BY s.seq",
            (owner,),
        ).fetchall()
        return [str(r[0]) for r in rows]

    def closed_invocations(
        self, owner: str, units: Iterable[str], limit: int, before: float | None
    ) -> list[str]:
        """The newest `limit` startups of `units` that `owner` has no resume state of and that
        started before `before` (unix seconds; None: none), oldest first: the reading starts
        after their first line, so their lines must not open them afresh."""
        if before is None:
            return []
        units = list(units)
        marks = ",".join("?" * len(units))
        rows = self._db.execute(
            f"SELECT invocation_id FROM startups s WHERE unit IN ({marks}) AND started_at < ?"
            " AND NOT EXISTS (SELECT 1 FROM builders b"
            " WHERE b.owner=? AND b.invocation_id=s.invocation_id)"
            " ORDER BY seq DESC LIMIT ?",
            [*units, before, owner, limit],
        ).fetchall()
        return [str(r[0]) for r in reversed(rows)]

    def startups(
        self,
        units: Iterable[str] | None = None,
        *,
        limit: int | None = None,
        before: str | None = None,
    ) -> list[StartupRecord]:
        """Records oldest first, optionally only of `units`; with `limit` only the newest
        `limit` of them, and with `before` (an invocation id) only those stored before it."""
        where, params = self._unit_filter(units)
        if before is not None:
            where.append("seq < (SELECT seq FROM startups WHERE invocation_id=?)")
            params.append(before)
        sql = "SELECT record FROM startups"
        if where:
            sql += " WHERE " + " AND ".join(where)
        if limit is None:
            rows = self._db.execute(sql + " ORDER BY seq", params).fetchall()
        else:
            newest = self._db.execute(sql + " ORDER BY seq DESC LIMIT ?", [*params, limit])
            rows = list(reversed(newest.fetchall()))
        return [record_from_json(r[0]) for r in rows]

    def recent_outcomes(self, units: Iterable[str], limit: int) -> list[tuple[str, str]]:
        """(invocation id, outcome) of the newest `limit` startups of `units`, oldest first:
        read without decoding a record, so what a restart reads is bounded by `limit`."""
        where, params = self._unit_filter(units)
        rows = self._db.execute(
            f"SELECT invocation_id, outcome FROM startups WHERE {where[0]}"
            " ORDER BY seq DESC LIMIT ?",
            [*params, limit],
        ).fetchall()
        return [(str(i), str(o)) for i, o in reversed(rows)]

    @staticmethod
    def _unit_filter(units: Iterable[str] | None) -> tuple[list[str], list[object]]:
        if units is None:
            return [], []
        units = list(units)
        return [f"unit IN ({','.join('?' * len(units))})"], list(units)

    def stored_outcome(self, invocation_id: str) -> str | None:
        """The outcome the state holds for this startup (None: not stored), read without
        decoding its record."""
        row = self._db.execute(
            "SELECT outcome FROM startups WHERE invocation_id=?", (invocation_id,)
        ).fetchone()
        return str(row[0]) if row else None

    def startup(self, invocation_id: str) -> StartupRecord | None:
        row = self._db.execute(
            "SELECT record FROM startups WHERE invocation_id=?", (invocation_id,)
        ).fetchone()
        return record_from_json(row[0]) if row else None

    def find_startup(self, ref: str, units: Iterable[str] | None = None) -> StartupRecord:
        """Resolve `latest` or an invocation-id prefix (>= 6 hex digits) to one record."""
        if ref == "latest":
            records = self.startups(units, limit=1)
            if not records:
                raise UsageError("no startups recorded yet")
            return records[-1]
        prefix = ref.lower()
        if len(prefix) < 6 or any(c not in "0123456789abcdef" for c in prefix):
            raise UsageError(
                f"startup {ref!r}: give `latest` or at least 6 hex digits of an invocation id"
            )
        # Ids only (hex digits: nothing LIKE treats specially); one record is decoded.
        where, params = self._unit_filter(units)
        where.append("invocation_id LIKE ?")
        hits = [
            str(r[0])
            for r in self._db.execute(
                f"SELECT invocation_id FROM startups WHERE {' AND '.join(where)} ORDER BY seq",
                [*params, prefix + "%"],
            )
        ]
        if not hits:
            raise UsageError(f"no startup with invocation id starting {ref!r}")
        if len(hits) > 1:
            ids = ", ".join(i[:12] for i in hits[:10])
            if len(hits) > 10:
                ids += f" and {len(hits) - 10} more"
            raise UsageError(f"startup {ref!r} is ambiguous: {ids}")
        record = self.startup(hits[0])
        assert record is not None
        return record

    def recent(self, unit: str, limit: int) -> list[StartupRecord]:
        """The unit's last `limit` startups, oldest first (the status page's history)."""
        rows = self._db.execute(
            "SELECT record FROM startups WHERE unit=?"
            " ORDER BY started_at DESC, invocation_id DESC LIMIT ?",
            (unit, limit),
        ).fetchall()
        return [record_from_json(r[0]) for r in reversed(rows)]

    def latest(self, unit: str, *, decided: bool = False) -> StartupRecord | None:
        """The unit's newest startup; with decided=True the newest that is ready or failed."""
        where = " AND outcome IN ('ready', 'failed')" if decided else ""
        row = self._db.execute(
            f"SELECT record FROM startups WHERE unit=?{where} ORDER BY seq DESC LIMIT 1",
            (unit,),
        ).fetchone()
        return record_from_json(row[0]) if row else None

    def previous_ready(self, record: StartupRecord) -> StartupRecord | None:
        """The unit's last ready startup before `record` in journal order (the newest ready one
        when `record` is not stored yet)."""
        row = self._db.execute(
            "SELECT record FROM startups WHERE unit=? AND outcome='ready' AND invocation_id != ?"
            " AND seq < coalesce((SELECT seq FROM startups WHERE invocation_id=?), 9e18)"
            " ORDER BY seq DESC LIMIT 1",
            (record.unit, record.invocation_id, record.invocation_id),
        ).fetchone()
        return record_from_json(row[0]) if row else None

    def outcome_counts(self, unit: str) -> dict[str, int]:
        """Startups of `unit` counted when first stored ready or failed (never decreasing)."""
        return {
            outcome: self.counter(f"startups_total:{outcome}:{unit}")
            for outcome in ("ready", "failed")
        }

    def baseline_id(self, unit: str) -> str | None:
        row = self._db.execute(
            "SELECT invocation_id FROM baselines WHERE unit=?", (unit,)
        ).fetchone()
        return str(row[0]) if row else None

    def baselines(self) -> dict[str, tuple[str, float]]:
        rows = self._db.execute("SELECT unit, invocation_id, pinned_at FROM baselines").fetchall()
        return {str(u): (str(i), float(t)) for u, i, t in rows}

    def data_version(self) -> int:
        """Changes when another connection commits (lets the daemon see `baseline --pin`)."""
        return int(self._db.execute("PRAGMA data_version").fetchone()[0])


def weaker_than_stored(
    record: StartupRecord, outcome: str, started_at: float, stored_json: str
) -> bool:
    """Whether `record` was derived from fewer of the startup's lines than the stored record.

    One startup's record only grows as its lines are read: the start time is its first line's,
    ready or failed never turns back to starting, the rule hits only add up and an end once
    seen stays. A record that started later, is still starting where the stored one is decided,
    has fewer hits or lost the end was read from a part of the startup (a scan `--since` inside
    it, a journal whose first lines were vacuumed, another journal's copy); storing it would
    replace the pinned baseline with a husk, so the stored record is kept. So is one with a
    ledger when `record` has none (a baseline file of version 1 imported over one of version 2).
    """
    if outcome in ("ready", "failed") and record.outcome == "starting":
        return True
    if record.started_at > started_at:
        return True
    try:
        stored = json.loads(stored_json)
        hits = sum(int(v) for v in (stored.get("rule_hits") or {}).values())
        ended = stored.get("ended_at")
        ledger = stored.get("ledger")
    except (ValueError, TypeError, AttributeError):
        return False  # an unreadable row is no reason to keep it
    return (
        sum(record.rule_hits.values()) < hits
        or (ended is not None and record.ended_at is None)
        or (ledger is not None and record.ledger is None)
    )


def broken_database(path: Path, exc: BaseException) -> str:
    """The one-line message for a state database SQLite cannot read, with the way out."""
    detail = " ".join(str(exc).split())[:200]  # one line, whatever SQLite said
    return (
        f"state database {path} is unreadable ({detail}); move it aside "
        f"(mv {path} {path}.broken) and rebuild it with `sentinel scan` "
        "(pinned baselines must be pinned again)"
    )
