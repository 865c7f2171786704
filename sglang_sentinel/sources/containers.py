"""Docker containers as watched targets: selection, start identity, partial-line reassembly.

A container is named `docker:NAME` wherever a unit is named `UNIT.service` (state, reports,
metrics, alerts), so one identity key serves both. Its entries come from Docker's journald log
driver (moby daemon/logger/journald/journald.go), which stamps every line of a logger instance
with the same fields:

- `CONTAINER_NAME` (the name at start), `CONTAINER_ID_FULL`, `IMAGE_NAME`, `CONTAINER_TAG`;
- `CONTAINER_LOG_EPOCH`: a random id made in `newJournald()`, i.e. once per logger instance;
  the daemon creates a logger on every container start (`Container.StartLogger`), so the
  epoch changes on every start, restart and restart-policy restart, and nowhere else;
- `CONTAINER_PARTIAL_ID` / `_ORDINAL` / `_LAST` on the pieces of a line the log copier split
  (at 16 KiB), and `CONTAINER_PARTIAL_MESSAGE=true` on every piece but the last.

`_SYSTEMD_UNIT` is docker.service and `_SYSTEMD_INVOCATION_ID` is dockerd's for every
container, so neither tells one start from another.

Every one of those fields is written by the client, and any process may write any of them
(`logger --journald`, `sd_journal_send`). A container line is trusted only when the fields
journald itself adds from the sender's kernel credentials and cgroup say dockerd sent it:
`_UID=0`, `_SYSTEMD_UNIT` one of the engine's units, `_COMM=dockerd`, `_TRANSPORT=journal`
(see `engine_mismatch`). A non-root process cannot choose its uid or join a system unit's cgroup.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, Final

from ..model import DOCKER_PREFIX

# A server_args line is ~50 KB; a line longer than this is cut rather than held in memory.
MAX_LINE_BYTES: Final = 1 << 20
# What journald records for dockerd itself: its kernel name (the executable's basename) and the
# native protocol the journald log driver writes with.
DOCKER_COMM: Final = "dockerd"
ENGINE_TRANSPORT: Final = "journal"


def target_of(name: str) -> str:
    """The identity key of the Docker container `name`: `docker:NAME`."""
    return DOCKER_PREFIX + name


def container_of(target: str) -> str | None:
    """The container name of a `docker:NAME` target, None for a unit."""
    return target[len(DOCKER_PREFIX) :] if target.startswith(DOCKER_PREFIX) else None


def split_targets(targets: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(units, container names) of a list of targets."""
    units: list[str] = []
    containers: list[str] = []
    for target in targets:
        name = container_of(target)
        if name is None:
            units.append(target)
        else:
            containers.append(name)
    return tuple(units), tuple(containers)


def add_container_matches(reader: Any, names: Sequence[str]) -> None:
    """Select the journald driver's entries of these containers (OR-ed with the unit matches)."""
    for name in names:
        reader.add_match(CONTAINER_NAME=name)
        reader.add_disjunction()


def engine_mismatch(
    field: Callable[[str], str | None], engine_units: Collection[str]
) -> str | None:
    """Why an entry naming a container is not the engine's (None: it is dockerd's own).

    `field` reads one of the entry's fields. Only fields journald adds from the sender (the
    underscore ones, which a client cannot set) are read: a field a client can set never
    decides identity alone.
    """
    unit = field("_SYSTEMD_UNIT")
    if unit not in engine_units:
        return f"sent from {unit or 'no unit'}, not from {' or '.join(engine_units)}"
    uid = field("_UID")
    if uid != "0":
        return f"sent by uid {uid}, not root"
    comm = field("_COMM")
    if comm != DOCKER_COMM:
        return f"sent by {comm!r}, not {DOCKER_COMM}"
    # _COMM is the process's own name (prctl can set it); _EXE is the binary it runs.
    exe = field("_EXE")
    if exe is None or _program(exe) != DOCKER_COMM:
        return f"sent by a process running {exe or 'no known binary'}, not {DOCKER_COMM}"
    transport = field("_TRANSPORT")
    if transport != ENGINE_TRANSPORT:
        return f"sent over {transport!r}, not the native protocol"
    return None


def _program(exe: str) -> str:
    """The file name of an `_EXE` path ("/usr/sbin/dockerd (deleted)" after an upgrade the
    engine has not been restarted for is still dockerd)."""
    return exe.removesuffix(" (deleted)").rsplit("/", 1)[-1]


def start_id(container_id_full: str, epoch: str | None) -> str | None:
    """The startup id of a container start: one per (container, log epoch).

    A recreated container has a new CONTAINER_ID_FULL, a restarted one a new epoch. Engines
    without the epoch field get None: the startup tracker then opens a startup at each new
    `server_args=` line, as it does for a journal without invocation ids.
    """
    if not epoch:
        return None
    digest = hashlib.sha256(f"docker\0{container_id_full}\0{epoch}".encode())
    return digest.hexdigest()[:32]


class PartialLines:
    """Joins the pieces of a line Docker's log copier split, per container and partial id.

    Newer engines tag each piece with CONTAINER_PARTIAL_ID and the last one with
    CONTAINER_PARTIAL_LAST=true; older ones only mark the non-final pieces with
    CONTAINER_PARTIAL_MESSAGE=true, so the next unmarked line of that container ends it.

    A line whose last piece never comes (journald's rate limit dropped it, dockerd died) is let
    go once its output (PRIORITY: the driver sends stdout at 6, stderr at 3) has gone on: the
    copier of one output finishes a line before it starts the next, so a new line there means
    the pieces held can never be completed.
    """

    def __init__(self) -> None:
        self._pending: dict[tuple[str, str], bytearray] = {}
        # (target, output) -> the partial id of the line in progress there (newer engines).
        self._open: dict[tuple[str, str], str] = {}
        self.dropped = 0  # lines let go without their last piece

    def add(
        self,
        target: str,
        raw: bytes,
        partial: bool,
        partial_id: str | None,
        output: str | None = None,
    ) -> bytes | None:
        """Feed one entry's MESSAGE; returns the whole line when this entry completes one.
        `output` (the entry's PRIORITY) tells a line that can no longer end; None: unknown."""
        key = (target, partial_id or "")
        if output is not None:
            where = (target, output)
            held = self._open.get(where)
            if held is not None and held != partial_id:
                del self._open[where]
                if self._pending.pop((target, held), None) is not None:
                    self.dropped += 1
            if partial and partial_id:
                self._open[where] = partial_id
            elif held == partial_id:
                self._open.pop(where, None)
        if partial:
            buf = self._pending.setdefault(key, bytearray())
            if len(buf) < MAX_LINE_BYTES:
                buf += raw[: MAX_LINE_BYTES - len(buf)]
            return None
        head = self._pending.pop(key, None)
        if head is None:
            return raw
        head += raw[: max(MAX_LINE_BYTES - len(head), 0)]
        return bytes(head)

    @property
    def pending(self) -> bool:
        """True while pieces wait for the rest of their line."""
        return bool(self._pending)

    def clear(self) -> None:
        self._pending.clear()
        self._open.clear()
