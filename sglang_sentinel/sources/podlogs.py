"""Kubernetes pod logs as a file layout: the kubelet's `/var/log/pods` (CRI log format).

The kubelet (pkg/kubelet/kuberuntime/helpers.go) keeps a container's output in
`<root>/<namespace>_<pod>_<uid>/<container>/<restartCount>.log`, one line per
`<RFC 3339 ns> <stdout|stderr> <F|P> <text>` (P: a piece of a line containerd split at 16 KiB).
It rotates a file over `containerLogMaxSize` to `N.log.<YYYYMMDD-HHMMSS>`, gzips older rotated
files and keeps `containerLogMaxFiles` (pkg/kubelet/logs/container_log_manager.go).

One stream, and one start, per `N.log` (a container restart is a new N, a new pod a new
directory): its id is made from the pod's uid, the container and N, so a startup keeps its id
however often it is read, also after the pod's files are gone.

Identity: `k8s:NAMESPACE/WORKLOAD/CONTAINER`, WORKLOAD being the pod's name without what a
controller changes when it makes a new pod (a Deployment's ReplicaSet hash and random suffix,
a DaemonSet's or Job's suffix), so a rolling update compares with the same baseline. A
StatefulSet's or LeaderWorkerSet's pod names end in ordinals (`name-0`, `lws-0-1`), which are
kept: each is a stable instance with its own baseline, also when recreated.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from ..model import PodRef, PodSelector
from .files import Stream, found

DEFAULT_POD_LOGS: Final = Path("/var/log/pods")
_LOG = re.compile(r"(0|[1-9][0-9]*)\.log(?:\.([0-9]{8}-[0-9]{6}))?(\.gz)?")


def split_pod_dir(name: str) -> tuple[str, str, str] | None:
    """(namespace, pod, uid) of a `<ns>_<pod>_<uid>` directory name (neither name has '_')."""
    parts = name.split("_")
    if len(parts) != 3 or not all(parts):
        return None
    return parts[0], parts[1], parts[2]


def start_id(uid: str, container: str, restart: str) -> str:
    """The id of one container start of one pod (its N.log)."""
    return hashlib.sha256(f"k8s\0{uid}\0{container}\0{restart}".encode()).hexdigest()[:32]


class PodLayout:
    """The CRI logs of the selected pods' containers under the kubelet's pod log directory."""

    def __init__(self, root: Path, selectors: Sequence[PodSelector]) -> None:
        self.root = root
        self.selectors = tuple(selectors)

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.target for s in self.selectors))

    def _pods(self) -> list[tuple[Path, tuple[PodSelector, ...], str, str]]:
        """(pod directory, the selectors it matches, pod name, uid) of the selected pods there
        now."""
        try:
            entries = sorted(os.scandir(self.root), key=lambda e: e.name)
        except OSError:
            return []
        out = []
        for entry in entries:
            split = split_pod_dir(entry.name)
            if split is None:
                continue
            ns, pod, uid = split
            matching = tuple(s for s in self.selectors if s.matches(ns, pod))
            if matching:
                out.append((Path(entry.path), matching, pod, uid))
        return out

    def directories(self) -> list[Path]:
        dirs = [self.root]
        for pod_dir, selectors, _pod, _uid in self._pods():
            dirs.append(pod_dir)
            dirs.extend(cdir for cdir, _selector in self._containers(pod_dir, selectors))
        return dirs

    @staticmethod
    def _containers(
        pod_dir: Path, selectors: tuple[PodSelector, ...]
    ) -> list[tuple[Path, PodSelector]]:
        """Each selected container's directory with the first selector naming it (or all of
        the pod): one pod's containers may be targets of their own (`NS/W/server`,
        `NS/W/router`), and a container is read under one target only."""
        try:
            names = sorted(os.listdir(pod_dir))
        except OSError:
            return []
        out = []
        for name in names:
            for selector in selectors:
                if selector.container in (None, name):
                    if (pod_dir / name).is_dir():
                        out.append((pod_dir / name, selector))
                    break
        return out

    def streams(self) -> list[Stream]:
        out = []
        for pod_dir, selectors, pod, uid in self._pods():
            for cdir, selector in self._containers(pod_dir, selectors):
                restarts: set[str] = set()
                try:
                    names = os.listdir(cdir)
                except OSError:
                    continue
                for name in names:
                    m = _LOG.fullmatch(name)
                    if m is not None:
                        restarts.add(m.group(1))
                for n in sorted(restarts, key=int):
                    stream = Stream(
                        key=f"k8s/{pod_dir.name}/{cdir.name}/{n}",
                        target=selector.target,
                        fmt="cri",
                        start=start_id(uid, cdir.name, n),
                        seed=str(cdir / n),
                        pod=PodRef(pod, uid),
                    )
                    out += found(self, stream)
        return out

    def files(self, stream: Stream) -> tuple[Path, ...]:
        """`N.log.<time>[.gz]` oldest first, then `N.log`."""
        base = Path(stream.seed)
        cdir, n = base.parent, base.name
        try:
            names = os.listdir(cdir)
        except OSError:
            return ()
        rotated: dict[str, Path] = {}
        live = None
        for name in names:
            m = _LOG.fullmatch(name)
            if m is None or m.group(1) != n:
                continue
            if m.group(2) is None:
                if m.group(3) is None:
                    live = cdir / name
                continue
            # A rotated file and its gzipped copy both there (being compressed): the plain one.
            if m.group(3) is None or m.group(2) not in rotated:
                rotated[m.group(2)] = cdir / name
        ordered = tuple(rotated[stamp] for stamp in sorted(rotated))
        return ordered + ((live,) if live is not None else ())
