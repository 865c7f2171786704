"""Docker's json-file logs as a file layout: the watched containers' `<id>-json.log` files.

Docker's default log driver (moby daemon/logger/jsonfilelog) writes one JSON object per line,
`{"log": "...\\n", "stream": "stderr", "time": "<RFC 3339 ns>"}`, to
`<root>/containers/<id>/<id>-json.log`; with `max-size` it renames the file to `.1` (older ones
shift to `.2`, ... up to `max-file`, `.N.gz` with `compress`) and opens a new one, and with one
file it removes and recreates it. The container's name is in `config.v2.json` beside it
(`"Name": "/sglang"`). A container logging to the journal (`--log-driver=journald`) has no
such file; the journal source reads it, under the same `docker:NAME` identity.

One stream per container (its id): a restart or a restart policy appends to the same file, so
the file source tells the starts apart by their lines (files.FileSource._start_of); a
container recreated under the name (`docker rm` + `docker run`, compose up) is a new id, a new
stream and a new start.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from .containers import target_of
from .files import Stream, found

DEFAULT_DOCKER_ROOT: Final = Path("/var/lib/docker")
_ID = re.compile(r"[0-9a-f]{64}")


def _rotated_index(name: str, live: str) -> int | None:
    """N of `<live>.N` / `<live>.N.gz` (rotated files), 0 for the live file, None otherwise."""
    if name == live:
        return 0
    if not name.startswith(live + "."):
        return None
    rest = name[len(live) + 1 :]
    if rest.endswith(".gz"):
        rest = rest[:-3]
    return int(rest) if rest.isdigit() and rest != "0" else None


class DockerLayout:
    """The json-file logs of the containers named `names` under Docker's root directory."""

    def __init__(self, root: Path, names: Sequence[str]) -> None:
        self.root = root
        self.containers_dir = root / "containers"
        self.names = frozenset(names)
        # The name in config.v2.json, by path, while its (mtime, size) stays the same; only the
        # containers there at the last listing (every container of the host is listed, and a
        # busy host makes and removes thousands).
        self._names: dict[Path, tuple[tuple[int, int], str | None]] = {}

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(target_of(name) for name in sorted(self.names))

    def directories(self) -> list[Path]:
        """The containers directory and every container's: a new container's name is only
        known once its config.v2.json is written."""
        dirs = [self.containers_dir]
        try:
            entries = list(os.scandir(self.containers_dir))
        except OSError:
            return dirs
        dirs.extend(Path(e.path) for e in entries if _ID.fullmatch(e.name) and e.is_dir())
        return dirs

    def streams(self) -> list[Stream]:
        out: list[Stream] = []
        known, self._names = self._names, {}
        for directory in self.directories()[1:]:
            name = self._name(directory, known)
            if name is None or name not in self.names:
                continue
            cid = directory.name
            out += found(
                self, Stream(key=f"docker/{cid}", target=target_of(name), fmt="docker", seed=cid)
            )
        return out

    def files(self, stream: Stream) -> tuple[Path, ...]:
        """`<id>-json.log.N[.gz]` from the highest N (the oldest) down, then `<id>-json.log`."""
        cid = stream.seed
        directory = self.containers_dir / cid
        live = f"{cid}-json.log"
        found: list[tuple[int, Path]] = []
        try:
            names = os.listdir(directory)
        except OSError:
            return ()
        for name in names:
            n = _rotated_index(name, live)
            if n is not None:
                found.append((n, directory / name))
        # `.1` and `.1.gz` both there (compression in progress): the plain one is complete.
        by_n: dict[int, Path] = {}
        for n, path in sorted(found, key=lambda item: item[1].name.endswith(".gz")):
            by_n.setdefault(n, path)
        ordered = sorted((n for n in by_n if n > 0), reverse=True)
        return tuple(by_n[n] for n in ordered) + ((by_n[0],) if 0 in by_n else ())

    def _name(
        self, directory: Path, known: dict[Path, tuple[tuple[int, int], str | None]]
    ) -> str | None:
        """The container's name from its config.v2.json (without Docker's leading '/'), read
        again only when the file changed since the listing before (`known`)."""
        path = directory / "config.v2.json"
        try:
            st = path.stat()
        except OSError:
            return None
        stamp = (st.st_mtime_ns, st.st_size)
        cached = known.get(path)
        if cached is None or cached[0] != stamp:
            try:
                doc: Any = json.loads(path.read_bytes())
            except (OSError, ValueError):
                doc = None
            name = doc.get("Name") if isinstance(doc, dict) else None
            cached = (stamp, (name.lstrip("/") or None) if isinstance(name, str) else None)
        self._names[path] = cached
        return cached[1]
