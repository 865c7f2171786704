"""Real journal parts for tests: export files, journal files, synthetic startups, a live journald.

Nothing here is a mock. Export files are written in systemd's Journal Export Format and turned
into journal files by `systemd-journal-remote`; the live journald is the distribution's
`systemd-journald` binary running standalone in its own journal namespace.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import IO, Any

from tools.demo_files import parse_export

ExportValue = str | bytes
ExportEntry = Mapping[str, ExportValue]

JOURNAL_REMOTE = Path("/lib/systemd/systemd-journal-remote")
JOURNALD = Path("/lib/systemd/systemd-journald")
# Where PID 1 keeps a unit's invocation id (journald reads it); tests write here only through
# LiveJournald.run_in_unit, for names from unique_unit().
SYSTEMD_UNITS_DIR = Path("/run/systemd/units")
REQUIRED_FIELDS = ("__REALTIME_TIMESTAMP", "__MONOTONIC_TIMESTAMP", "_BOOT_ID")
# Address fields the export format allows besides ordinary field names.
_SPECIAL_FIELDS = frozenset(
    {"__CURSOR", "__REALTIME_TIMESTAMP", "__MONOTONIC_TIMESTAMP", "__SEQNUM"}
)
_FIELD_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")

# MESSAGE_IDs PID 1 attaches to unit lifecycle lines (systemd's sd-messages.h).
UNIT_STARTING = "7d4958e842da4a758f6c1cdc7b36dcc5"
UNIT_STARTED = "39f53479d3a045ac8e11786248231fbf"
UNIT_FAILED = "be02cf6855d2428ba40df7e9d022f03d"  # "Failed to start X." (start job failed)
UNIT_FAILURE_RESULT = "d9b373ed55a64feb8242e02dbe79a49c"  # "X: Failed with result '...'."
UNIT_PROCESS_EXIT = "98e322203f7a4ed290d09fe03c09fe15"
UNIT_STOPPING = "de5b426a63be47a7b6ac3eaac82e2f6f"
UNIT_STOPPED = "9d1aaa27d60140bd96365438aad20286"
UNIT_SUCCESS = "7ad2d189f7e94e70a38c781354912448"  # "X: Deactivated successfully."
UNIT_RESOURCES = "ae8f7b866b0347b9af31fe1c80b127c0"  # "X: Consumed ... CPU time."


class JournalToolError(RuntimeError):
    """A journal tool (journal-remote, journald, cgroups) is missing or misbehaved."""


# --- unit names unique to this test run ------------------------------------------------------

# Every unit a live test runs as carries this token, so its cgroup and PID 1's invocation-id
# symlink can never be a real service's (tests once overwrote and deleted the symlink of a running
# `sglang-qwen.service`). Set once per test run and inherited by child processes (stand-ins,
# benchmark helpers), so a parent and its children agree on the names.
RUN_ID_ENV = "SENTINEL_TEST_RUN_ID"
RUN_ID = os.environ.setdefault(RUN_ID_ENV, f"st{os.getpid()}x{secrets.token_hex(3)}")


def unique_unit(stem: str = "sglang-qwen") -> str:
    """A unit name for a live test, unique to this test run: `sglang-qwen-st1234xab12cd.service`."""
    return f"{stem}-{RUN_ID}.service"


def is_unique_unit(unit_name: str) -> bool:
    """True for names `unique_unit` made in this test run (the only ones `run_in_unit` accepts)."""
    return unit_name.endswith(f"-{RUN_ID}.service")


# --- export format ---------------------------------------------------------------------------


def _needs_binary(value: bytes) -> bool:
    """Mirror systemd's export writer: anything but printable UTF-8 goes binary-safe."""
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text)


def _encode_field(name: str, value: ExportValue) -> bytes:
    if name not in _SPECIAL_FIELDS and (name.startswith("__") or not _FIELD_NAME.fullmatch(name)):
        raise ValueError(f"invalid journal field name {name!r}: use [A-Z0-9_], max 64 chars")
    raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    key = name.encode("ascii")
    if _needs_binary(raw):
        return key + b"\n" + struct.pack("<Q", len(raw)) + raw + b"\n"
    return key + b"=" + raw + b"\n"


def export_bytes(entries: Iterable[ExportEntry]) -> bytes:
    """Serialise entries in Journal Export Format (required fields first, then in given order)."""
    chunks: list[bytes] = []
    for index, entry in enumerate(entries):
        missing = [name for name in REQUIRED_FIELDS if name not in entry]
        if missing:
            raise ValueError(f"export entry {index} lacks required field(s) {', '.join(missing)}")
        ordered = [*REQUIRED_FIELDS, *(k for k in entry if k not in REQUIRED_FIELDS)]
        chunks.extend(_encode_field(name, entry[name]) for name in ordered)
        chunks.append(b"\n")
    return b"".join(chunks)


def write_export(entries: Iterable[ExportEntry], path: Path | str) -> Path:
    """Write entries to `path` in systemd's Journal Export Format; returns the path."""
    target = Path(path)
    target.write_bytes(export_bytes(entries))
    return target


def build_journal(
    export_paths: Path | str | Iterable[Path | str], out_dir: Path | str, name: str = "test"
) -> Path:
    """Turn export files into a real journal file `out_dir/<name>.journal`; returns out_dir."""
    paths = [export_paths] if isinstance(export_paths, Path | str) else list(export_paths)
    if not JOURNAL_REMOTE.exists():
        raise JournalToolError(
            f"{JOURNAL_REMOTE} not found: install systemd-journal-remote (scripts/bootstrap.sh)"
        )
    directory = Path(out_dir)
    directory.mkdir(parents=True, exist_ok=True)
    # journal-remote insists on an output name ending in ".journal".
    output = directory / f"{name}.journal"
    if len(paths) > 1:
        # journal-remote reads several inputs in an order of its own, and the file's order is
        # the journal's order (what the sentinel follows); one stream keeps the order given.
        joined = directory / f".{name}.joined.export"
        joined.write_bytes(b"".join(_export_entries_block(Path(p)) for p in paths))
        paths = [joined]
    result = subprocess.run(
        [str(JOURNAL_REMOTE), f"--output={output}", *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0 or not output.exists():
        raise JournalToolError(
            f"systemd-journal-remote failed ({result.returncode}) for {paths}: {result.stderr}"
        )
    return directory


def _export_entries_block(path: Path) -> bytes:
    """An export file's bytes ending in exactly one blank line (the entry separator)."""
    data = path.read_bytes()
    if not data or data.endswith(b"\n\n"):
        return data
    return data + (b"\n" if data.endswith(b"\n") else b"\n\n")


# --- the vendored fixtures -------------------------------------------------------------------

FIXTURES_DIR = Path(__file__).resolve().parents[1] / "fixtures"


def seed_fixture_dir() -> Path:
    """The seed-flag-change fixture, vendored in the repository (tests read nothing outside it)."""
    path = FIXTURES_DIR / "seed-flag-change"
    if not (path / "journal.export").is_file():
        raise JournalToolError(f"vendored fixture missing: {path}")
    return path


def seed_journal(tmp_path: Path) -> Path:
    """A journal directory built from the seed-flag-change journal.export."""
    return build_journal(seed_fixture_dir() / "journal.export", tmp_path / "seed-journal", "seed")


_TIME_MARKER = re.compile(rb"^@(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) ")


def read_fixture_log(path: Path | str) -> list[tuple[str | None, bytes]]:
    """Lines of a fixture .log: (time from an `@YYYY-mm-dd HH:MM:SS ` marker or None, raw bytes).

    Literal `\\r` and `\\x1b` in the file become the CR and ESC bytes they stand for.
    """
    lines: list[tuple[str | None, bytes]] = []
    for raw in Path(path).read_bytes().split(b"\n"):
        if not raw:
            continue
        when: str | None = None
        if marker := _TIME_MARKER.match(raw):
            when = marker.group(1).decode("ascii")
            raw = raw[marker.end() :]
        lines.append((when, raw.replace(b"\\r", b"\r").replace(b"\\x1b", b"\x1b")))
    return lines


# --- synthetic startups ----------------------------------------------------------------------

_SGLANG_TIME = re.compile(rb"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")


DEFAULT_START = datetime(2026, 3, 9, 21, 31, 7, tzinfo=timezone.utc)


def _line_time(when: str | None, raw: bytes) -> str | None:
    """A fixture line's time: its `@` marker, else its SGLang `[YYYY-mm-dd HH:MM:SS` prefix."""
    if when is None and (prefix := _SGLANG_TIME.match(raw)):
        return prefix.group(1).decode("ascii")
    return when


def _parse_time(value: datetime | str) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    return datetime.strptime(value, "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)


def _micros(value: datetime) -> int:
    delta = value - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


@dataclass
class StartupScript:
    """Builds the journal entries of one synthetic start of a unit, field for field as journald
    stores them (compare the seed fixture's journal.export).

    Times are UTC. An entry with a time (given, or a service line's SGLang
    `[YYYY-mm-dd HH:MM:SS` prefix) is at least 1 µs after the previous one; one without comes 1 ms
    after it.
    """

    unit: str = "sglang-qwen.service"
    description: str = "SGLang Qwen3.5-122B-A10B (TP4)"
    invocation_id: str = field(default_factory=lambda: secrets.token_hex(16))
    pid: int = 412281
    cmdline: str = "/opt/sglang/.venv/bin/python3 -m sglang.launch_server --tp-size 4"
    identifier: str | None = None  # SYSLOG_IDENTIFIER; defaults to the unit name's stem
    comm: str = "python3"
    exe: str = "/usr/bin/python3.12"
    # None: 2 s before the first timed line given to log(), else DEFAULT_START.
    start: datetime | str | None = None
    boot_at: datetime | str = datetime(2026, 3, 9, 8, 0, 0, tzinfo=timezone.utc)
    boot_id: str = "5d1b2a0c9e8f4f7a8b6c5d4e3f2a1b0c"
    machine_id: str = "3d1219c7c4c5404aaa1f6d2a48adfda4"
    hostname: str = "llm-two"
    stream_id: str = field(default_factory=lambda: secrets.token_hex(16))
    _entries: list[dict[str, ExportValue]] = field(default_factory=list, init=False, repr=False)
    _now_us: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        self._clock_set = self.start is not None
        self._now_us = _micros(_parse_time(self.start or DEFAULT_START)) - 1000
        self._boot_us = _micros(_parse_time(self.boot_at))
        # journal-remote drops entries with a negative monotonic time: boot before the start.
        if self._boot_us > self._now_us:
            self._boot_us = self._now_us - 3_600_000_000

    # clock
    def at(self, when: datetime | str) -> StartupScript:
        """Move the clock forward to `when` (never backwards)."""
        self._now_us = max(self._now_us, _micros(_parse_time(when)) - 1000)
        self._clock_set = True
        return self

    def _tick(self, when: datetime | str | None) -> int:
        # Like the seed export: a line without a time of its own comes 1 ms after the previous one.
        wanted = _micros(_parse_time(when)) if when is not None else self._now_us + 1000
        # An unset clock takes the first explicit time as is, even if before DEFAULT_START.
        self._now_us = wanted if not self._clock_set else max(wanted, self._now_us + 1)
        self._clock_set = True
        return self._now_us

    def _base(self, when: datetime | str | None) -> dict[str, ExportValue]:
        now = self._tick(when)
        return {
            "__REALTIME_TIMESTAMP": str(now),
            "__MONOTONIC_TIMESTAMP": str(now - self._boot_us),
            "_BOOT_ID": self.boot_id,
            "_MACHINE_ID": self.machine_id,
            "_HOSTNAME": self.hostname,
        }

    # PID 1
    def _pid1(
        self,
        message: str,
        message_id: str,
        *,
        when: datetime | str | None = None,
        priority: int = 6,
        code_file: str = "src/core/job.c",
        extra: Mapping[str, str] | None = None,
    ) -> StartupScript:
        entry = self._base(when)
        entry.update(
            {
                "_PID": "1",
                "_UID": "0",
                "_GID": "0",
                "_COMM": "systemd",
                "_EXE": "/usr/lib/systemd/systemd",
                "_CMDLINE": "/sbin/init",
                "_SYSTEMD_CGROUP": "/init.scope",
                "_SYSTEMD_UNIT": "init.scope",
                "_SYSTEMD_SLICE": "-.slice",
                "_TRANSPORT": "journal",
                "SYSLOG_FACILITY": "3",
                "SYSLOG_IDENTIFIER": "systemd",
                "CODE_FILE": code_file,
                "UNIT": self.unit,
                "INVOCATION_ID": self.invocation_id,
                "PRIORITY": str(priority),
                "MESSAGE": message,
                "MESSAGE_ID": message_id,
            }
        )
        entry.update(extra or {})
        self._entries.append(entry)
        return self

    @property
    def _title(self) -> str:
        return f"{self.unit} - {self.description}" if self.description else self.unit

    def starting(self, when: datetime | str | None = None) -> StartupScript:
        return self._pid1(
            f"Starting {self._title}...", UNIT_STARTING, when=when, extra={"JOB_TYPE": "start"}
        )

    def started(self, when: datetime | str | None = None) -> StartupScript:
        return self._pid1(
            f"Started {self._title}.",
            UNIT_STARTED,
            when=when,
            extra={"JOB_TYPE": "start", "JOB_RESULT": "done"},
        )

    def failed_to_start(self, when: datetime | str | None = None) -> StartupScript:
        return self._pid1(
            f"Failed to start {self._title}.",
            UNIT_FAILED,
            when=when,
            priority=3,
            extra={"JOB_TYPE": "start", "JOB_RESULT": "failed"},
        )

    def process_exited(self, status: int = 1, when: datetime | str | None = None) -> StartupScript:
        names = {0: "SUCCESS", 1: "FAILURE", 2: "INVALIDARGUMENT"}
        return self._pid1(
            f"{self.unit}: Main process exited, code=exited, status={status}/"
            f"{names.get(status, str(status))}",
            UNIT_PROCESS_EXIT,
            when=when,
            priority=5 if status else 7,
            code_file="src/core/service.c",
            extra={"EXIT_CODE": "exited", "EXIT_STATUS": str(status)},
        )

    def failed(
        self, result: str = "exit-code", when: datetime | str | None = None
    ) -> StartupScript:
        return self._pid1(
            f"{self.unit}: Failed with result '{result}'.",
            UNIT_FAILURE_RESULT,
            when=when,
            priority=4,
            code_file="src/core/unit.c",
            extra={"UNIT_RESULT": result},
        )

    def stopping(self, when: datetime | str | None = None) -> StartupScript:
        return self._pid1(
            f"Stopping {self._title}...",
            UNIT_STOPPING,
            when=when,
            extra={"JOB_TYPE": "stop", "JOB_RESULT": "done"},
        )

    def deactivated(self, when: datetime | str | None = None) -> StartupScript:
        return self._pid1(f"{self.unit}: Deactivated successfully.", UNIT_SUCCESS, when=when)

    def stopped(self, when: datetime | str | None = None) -> StartupScript:
        return self._pid1(
            f"Stopped {self._title}.",
            UNIT_STOPPED,
            when=when,
            extra={"JOB_TYPE": "stop", "JOB_RESULT": "done"},
        )

    def consumed(
        self, cpu: str = "1min 2.345s", when: datetime | str | None = None
    ) -> StartupScript:
        return self._pid1(f"{self.unit}: Consumed {cpu} CPU time.", UNIT_RESOURCES, when=when)

    # the service's own stdout
    def line(
        self, message: str | bytes, when: datetime | str | None = None, pid: int | None = None
    ) -> StartupScript:
        """One stdout line of the service (a TP rank is another `pid` in the same invocation)."""
        raw = message.encode("utf-8") if isinstance(message, str) else message
        when = when if when is not None else _line_time(None, raw)
        entry = self._base(when)
        entry.update(
            {
                "_PID": str(pid if pid is not None else self.pid),
                "_UID": "0",
                "_GID": "0",
                "_COMM": self.comm,
                "_EXE": self.exe,
                "_CMDLINE": self.cmdline,
                "_SYSTEMD_CGROUP": f"/system.slice/{self.unit}",
                "_SYSTEMD_UNIT": self.unit,
                "_SYSTEMD_SLICE": "system.slice",
                "_SYSTEMD_INVOCATION_ID": self.invocation_id,
                "_TRANSPORT": "stdout",
                "_STREAM_ID": self.stream_id,
                "SYSLOG_IDENTIFIER": self.identifier or self.unit.rsplit(".", 1)[0],
                "PRIORITY": "6",
                "SYSLOG_FACILITY": "3",
                "MESSAGE": message,
            }
        )
        self._entries.append(entry)
        return self

    def lines(self, messages: Iterable[str | bytes]) -> StartupScript:
        for message in messages:
            self.line(message)
        return self

    def log(self, fixture_lines: Iterable[tuple[str | None, bytes]]) -> StartupScript:
        """Replay `read_fixture_log` output: PID 1's lines about this unit become PID 1 entries."""
        unit = re.escape(self.unit.encode("utf-8"))
        pid1: list[tuple[re.Pattern[bytes], str]] = [
            (re.compile(rb"^Starting " + unit + rb"\b"), "starting"),
            (re.compile(rb"^Started " + unit + rb"\b"), "started"),
            (re.compile(rb"^Failed to start " + unit + rb"\b"), "failed_to_start"),
            (re.compile(rb"^Stopping " + unit + rb"\b"), "stopping"),
            (re.compile(rb"^Stopped " + unit + rb"\b"), "stopped"),
            (re.compile(unit + rb": Deactivated successfully\.$"), "deactivated"),
        ]
        fixture_lines = list(fixture_lines)
        if not self._clock_set:
            # Like the seed export: PID 1's "Started" 2 s before the first timed line.
            first = next(
                (_line_time(w, raw) for w, raw in fixture_lines if _line_time(w, raw)), None
            )
            if first is not None:
                self.at(_parse_time(first) - timedelta(seconds=2))
        for when, raw in fixture_lines:
            text = raw.decode("utf-8", "replace")
            if consumed := re.match(re.escape(self.unit) + r": Consumed (.*) CPU time\.$", text):
                self.consumed(consumed.group(1), when=when)
            elif exited := re.search(r": Main process exited, code=exited, status=(\d+)/", text):
                self.process_exited(int(exited.group(1)), when=when)
            elif failed := re.search(
                re.escape(self.unit) + r": Failed with result '(.*)'\.$", text
            ):
                self.failed(failed.group(1), when=when)
            elif method := next((name for rx, name in pid1 if rx.search(raw)), None):
                getattr(self, method)(when=when)
            else:
                self.line(raw, when=when)
        return self

    def entries(self) -> list[dict[str, ExportValue]]:
        return [dict(entry) for entry in self._entries]

    def write(self, path: Path | str) -> Path:
        return write_export(self._entries, path)


def ready_startup(start: str, max_running_requests: int) -> StartupScript:
    """A minimal ready startup: PID 1's Started line, the TP0 summary line, ready.

    All such startups share one boot (2026-01-01), so their monotonic times agree with realtime
    across journal files, as they would on a real host.
    """
    s = StartupScript(start=start, boot_at="2026-01-01 00:00:00")
    s.started(start)
    day = start[:10]
    s.line(
        f"[{day} 10:00:50 TP0] max_total_num_tokens=1000, chunked_prefill_size=8192, "
        f"max_prefill_tokens=16384, max_running_requests={max_running_requests}, "
        "context_len=4096, available_gpu_mem=10.00 GB"
    )
    s.line(f"[{day} 10:00:55] The server is fired up and ready to roll!")
    return s


# --- a live journald -------------------------------------------------------------------------

_instances = itertools.count()


def ensure_machine_id() -> str:
    """journald refuses to start without /etc/machine-id; create one when missing."""
    path = Path("/etc/machine-id")
    if not path.exists() or not path.read_text().strip():
        setup = shutil.which("systemd-machine-id-setup")
        if setup:
            subprocess.run([setup], check=True, capture_output=True)
        else:
            path.write_text(secrets.token_hex(16) + "\n")
    return path.read_text().strip()


def cgroup_hierarchies() -> list[Path]:
    """Where a service's cgroup lives: name=systemd v1 (+ unified) on hybrid, else cgroup2."""
    root = Path("/sys/fs/cgroup")
    if (root / "cgroup.controllers").exists():
        return [root]
    found = [root / "systemd"] if (root / "systemd" / "cgroup.procs").exists() else []
    if (root / "unified" / "cgroup.controllers").exists():
        found.append(root / "unified")
    if not found:
        raise JournalToolError("no usable cgroup hierarchy under /sys/fs/cgroup")
    return found


def _deadline_wait(check: Any, timeout: float, what: str, step: float = 0.01) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise JournalToolError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(step)


class LiveJournald:
    """A standalone systemd-journald in its own journal namespace.

    A namespace (`systemd-journald NAME`) keeps it apart from any system journald and from other
    test sessions: sockets in /run/systemd/journal.NAME/, files in
    /var/log/journal/<machine-id>.NAME/ (or /run/log/journal/... without /var/log/journal).
    """

    def __init__(self, namespace: str | None = None) -> None:
        self.namespace = namespace or f"sentinel-test-{RUN_ID}-{next(_instances)}"
        self.socket_dir = Path(f"/run/systemd/journal.{self.namespace}")
        self.machine_id = ""
        self.journal_dir = Path()
        self._proc: subprocess.Popen[bytes] | None = None
        self._children: list[subprocess.Popen[bytes]] = []
        self._cgroups: list[Path] = []
        self._links: list[Path] = []
        self._created_dirs: list[Path] = []

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise JournalToolError("journald not started")
        return self._proc.pid

    @property
    def stdout_socket(self) -> Path:
        return self.socket_dir / "stdout"

    @property
    def native_socket(self) -> Path:
        return self.socket_dir / "socket"

    def start(self, timeout: float = 10.0) -> LiveJournald:
        if os.geteuid() != 0:
            raise JournalToolError("a live journald needs root")
        if not JOURNALD.exists():
            raise JournalToolError(f"{JOURNALD} not found: install systemd (scripts/bootstrap.sh)")
        self.machine_id = ensure_machine_id()
        candidates = [
            Path(base) / f"{self.machine_id}.{self.namespace}"
            for base in ("/var/log/journal", "/run/log/journal")
        ]
        self._proc = subprocess.Popen(
            [str(JOURNALD), self.namespace],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

        def ready() -> bool:
            assert self._proc is not None
            if self._proc.poll() is not None:
                err = self._proc.stderr.read().decode() if self._proc.stderr else ""
                raise JournalToolError(f"journald exited with {self._proc.returncode}: {err}")
            return self.stdout_socket.exists() and any(
                any(c.glob("*.journal")) for c in candidates if c.is_dir()
            )

        _deadline_wait(ready, timeout, f"journald namespace {self.namespace}")
        self.journal_dir = next(c for c in candidates if c.is_dir() and any(c.glob("*.journal")))
        return self

    def stop(self) -> None:
        """Kill our children by PID, remove their cgroups, stop journald, delete its files."""
        for child in self._children:
            if child.poll() is None:
                child.kill()
            child.wait(timeout=10)
        for link in self._links:
            link.unlink(missing_ok=True)
        for made in reversed(self._created_dirs):
            with contextlib.suppress(OSError):
                made.rmdir()
        for cgroup in reversed(self._cgroups):
            # An exited process may linger in the cgroup for a moment.
            with contextlib.suppress(JournalToolError, FileNotFoundError):
                _deadline_wait(lambda c=cgroup: _try_rmdir(c), 5.0, f"rmdir {cgroup}")
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc is not None and self._proc.stderr:
            self._proc.stderr.close()
        shutil.rmtree(self.socket_dir, ignore_errors=True)
        if self.journal_dir != Path():
            shutil.rmtree(self.journal_dir, ignore_errors=True)

    def __enter__(self) -> LiveJournald:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _cgroup_dirs(self, unit_name: str, slice_name: str) -> list[Path]:
        dirs: list[Path] = []
        for hierarchy in cgroup_hierarchies():
            for path in (hierarchy / slice_name, hierarchy / slice_name / unit_name):
                if not path.exists():
                    path.mkdir()
                    self._cgroups.append(path)
                elif path.name == unit_name and path not in self._cgroups:
                    # Someone else's cgroup (a leftover or a live unit): never join it.
                    raise JournalToolError(f"cgroup {path} already exists; not ours to use")
            dirs.append(hierarchy / slice_name / unit_name)
        return dirs

    def run_in_unit(
        self,
        unit_name: str,
        argv: Sequence[str],
        invocation_id: str | None = None,
        *,
        identifier: str | None = None,
        slice_name: str = "system.slice",
        stdin: int | IO[Any] | None = subprocess.DEVNULL,
        env: Mapping[str, str] | None = None,
        journal_stream_env: bool = False,
    ) -> subprocess.Popen[bytes]:
        """Start argv as if systemd ran it as `unit_name`: in the unit's cgroup, stdout/stderr on a
        journald stream, and (if given) with `invocation_id` as _SYSTEMD_INVOCATION_ID.

        `journal_stream_env`: also set JOURNAL_STREAM=DEVICE:INODE of that stream, as systemd does
        (through a tiny exec wrapper: the stream is connected in the child, after fork)."""
        if journal_stream_env:
            argv = [sys.executable, "-c", _SET_JOURNAL_STREAM, *argv]
        if not is_unique_unit(unit_name):
            raise JournalToolError(
                f"run_in_unit({unit_name!r}): not a name unique to this test run; use"
                f" journaltools.unique_unit(), never a real service's name"
            )
        cgroups = self._cgroup_dirs(unit_name, slice_name)
        if invocation_id is not None:
            for cgroup in cgroups:
                # What PID 1 does; journald 252 does not read it (see the symlink below).
                os.setxattr(cgroup, "trusted.invocation_id", invocation_id.encode("ascii"))
            # journald reads a unit's invocation ID from PID 1's symlink in /run/systemd/units/.
            units = SYSTEMD_UNITS_DIR
            for missing in reversed([units, *units.parents]):
                if not missing.exists():
                    missing.mkdir()
                    self._created_dirs.append(missing)
            link = units / f"invocation:{unit_name}"
            if link.is_symlink() and link not in self._links:
                raise JournalToolError(f"{link} already exists; not ours to replace")
            tmp = units / f".invocation:{unit_name}.{os.getpid()}"
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(invocation_id)
            tmp.replace(link)
            if link not in self._links:
                self._links.append(link)
        header = (
            f"{identifier or unit_name.rsplit('.', 1)[0]}\n{unit_name}\n6\n1\n0\n0\n0\n"
        ).encode()
        stream_path = str(self.stdout_socket)
        procs_files = [str(c / "cgroup.procs") for c in cgroups]

        def enter_unit() -> None:
            # Runs in the child before exec: join the cgroup first, so journald's SO_PEERCRED
            # lookup of this PID finds the unit, then connect the stream as systemd does.
            pid = str(os.getpid()).encode()
            for procs in procs_files:
                fd = os.open(procs, os.O_WRONLY)
                try:
                    os.write(fd, pid)
                finally:
                    os.close(fd)
            stream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            stream.connect(stream_path)
            stream.shutdown(socket.SHUT_RD)
            stream.sendall(header)
            os.dup2(stream.fileno(), 1)
            os.dup2(stream.fileno(), 2)
            stream.close()

        child = subprocess.Popen(
            list(argv),
            stdin=stdin,
            env=dict(env) if env is not None else None,
            preexec_fn=enter_unit,
        )
        self._children.append(child)
        return child

    def send(self, message: str | bytes, **fields: str | bytes) -> None:
        """Log one entry over the native protocol (like sd_journal_send) to this journald."""
        payload = b"".join(
            _native_field(name, value) for name, value in {"MESSAGE": message, **fields}.items()
        )
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.sendto(payload, str(self.native_socket))

    def entries(self, **matches: str) -> list[dict[str, bytes]]:
        """Entries as raw bytes via `journalctl -D <journal_dir> -o export FIELD=value...`."""
        args = [f"{name}={value}" for name, value in matches.items()]
        out = subprocess.run(
            ["journalctl", "-D", str(self.journal_dir), "-o", "export", *args],
            capture_output=True,
            check=True,
        ).stdout
        return parse_export(out)

    def wait_for_entries(
        self, count: int, timeout: float = 10.0, **matches: str
    ) -> list[dict[str, bytes]]:
        """Block (on journal change events, with a deadline) until `count` entries match."""
        from systemd import journal

        reader = journal.Reader(path=str(self.journal_dir))
        try:
            for name, value in matches.items():
                reader.add_match(**{name: value})
            seen = 0
            deadline = time.monotonic() + timeout
            while True:
                while reader.get_next():
                    seen += 1
                if seen >= count:
                    return self.entries(**matches)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise JournalToolError(
                        f"saw {seen} of {count} entries matching {matches} after {timeout}s"
                    )
                reader.wait(min(remaining, 0.5))
        finally:
            reader.close()


# Sets JOURNAL_STREAM from stderr (already the journald stream) and execs the real command.
_SET_JOURNAL_STREAM = (
    "import os, sys; st = os.fstat(2);"
    " os.environ['JOURNAL_STREAM'] = f'{st.st_dev}:{st.st_ino}';"
    " os.execvp(sys.argv[1], sys.argv[1:])"
)


def _native_field(name: str, value: str | bytes) -> bytes:
    raw = value.encode("utf-8") if isinstance(value, str) else value
    if b"\n" in raw:
        return name.encode() + b"\n" + struct.pack("<Q", len(raw)) + raw + b"\n"
    return name.encode() + b"=" + raw + b"\n"


def _try_rmdir(path: Path) -> bool:
    try:
        path.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


@contextlib.contextmanager
def live_journald() -> Iterator[LiveJournald]:
    """Start a LiveJournald and stop it (and everything it ran) afterwards."""
    daemon = LiveJournald()
    try:
        yield daemon.start()
    finally:
        daemon.stop()
