"""Docker json-file and kubelet pod-log layouts written file by file, as the engines write them.

DockerDir follows moby's json-file driver (daemon/logger/jsonfilelog, loggerutils/logfile.go):
16 KiB pieces whose `log` lacks the newline, rotation by rename to `.1`..`.N` (`.N.gz` when
compressed), delete-and-recreate with one file. PodDir follows the kubelet: `N.log` per restart,
CRI lines with `P`/`F` tags split at 16 KiB, rotation to `N.log.YYYYMMDD-HHMMSS`, gzip of older
rotated files.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sglang_sentinel.sources import FileSource, Layout, readers

PIECE = 16 * 1024  # Docker's copier buffer and containerd's max_container_log_line_size


def rfc3339(us: int) -> str:
    """RFC 3339 with nanoseconds, as Docker and containerd write it."""
    dt = datetime.fromtimestamp(us // 1_000_000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + f".{us % 1_000_000:06d}123Z"


class Clock:
    """Line times: one microsecond-exact step per line, from a fixed start."""

    def __init__(self, start_us: int = 1_767_261_600_000_000) -> None:  # 2026-01-01 10:00 UTC
        self.us = start_us

    def next(self, step_us: int = 1000) -> int:
        self.us += step_us
        return self.us


class DockerDir:
    """One container's directory under `<root>/containers/<id>/`."""

    def __init__(self, root: Path, cid: str, name: str, clock: Clock | None = None) -> None:
        self.cid = cid
        self.dir = root / "containers" / cid
        self.dir.mkdir(parents=True, exist_ok=True)
        self.clock = clock or Clock()
        self.write_config(name)

    def write_config(self, name: str, driver: str = "json-file") -> None:
        doc = {"ID": self.cid, "Name": "/" + name, "HostConfig": {"LogConfig": {"Type": driver}}}
        tmp = self.dir / ".config.v2.json.tmp"
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, self.dir / "config.v2.json")  # as moby writes it (ioutils.AtomicWriteFile)

    @property
    def live(self) -> Path:
        return self.dir / f"{self.cid}-json.log"

    def line(self, text: str, stream: str = "stderr") -> int:
        """Append one line (in 16 KiB pieces when longer); returns its (first piece's) time."""
        data = text.encode()
        first = 0
        with open(self.live, "ab") as fh:
            for at in range(0, max(len(data), 1), PIECE):
                piece = data[at : at + PIECE]
                last = at + PIECE >= len(data)
                t = self.clock.next()
                first = first or t
                record = {
                    "log": piece.decode("utf-8", "surrogateescape") + ("\n" if last else ""),
                    "stream": stream,
                    "time": rfc3339(t),
                }
                # moby writes the compact form (no spaces), the fields in this order.
                fh.write(json.dumps(record, separators=(",", ":")).encode() + b"\n")
        return first

    def rotate(self, max_file: int, compress: bool = False) -> None:
        """What moby's logfile.go does when max-size is reached."""
        self.live.touch()  # the file is there from the container's start on
        if max_file < 2:
            self.live.unlink()
            self.live.touch()
            return
        for n in range(max_file - 1, 0, -1):
            for suffix in ("", ".gz"):
                src = self.dir / f"{self.cid}-json.log.{n}{suffix}"
                if src.exists():
                    if n + 1 >= max_file:
                        src.unlink()
                    else:
                        src.rename(self.dir / f"{self.cid}-json.log.{n + 1}{suffix}")
        self.live.rename(self.dir / f"{self.cid}-json.log.1")
        self.live.touch()
        if compress:
            gzip_file(self.dir / f"{self.cid}-json.log.1")


class PodDir:
    """One pod's `<ns>_<pod>_<uid>/` under the kubelet's pod log directory."""

    def __init__(self, root: Path, ns: str, pod: str, uid: str, clock: Clock | None = None):
        self.dir = root / f"{ns}_{pod}_{uid}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.clock = clock or Clock()

    def live(self, container: str, restart: int) -> Path:
        cdir = self.dir / container
        cdir.mkdir(exist_ok=True)
        return cdir / f"{restart}.log"

    def line(self, container: str, restart: int, text: str, stream: str = "stderr") -> int:
        data = text.encode()
        first = 0
        with open(self.live(container, restart), "ab") as fh:
            for at in range(0, max(len(data), 1), PIECE):
                piece = data[at : at + PIECE]
                tag = "F" if at + PIECE >= len(data) else "P"
                t = self.clock.next()
                first = first or t
                fh.write(f"{rfc3339(t)} {stream} {tag} ".encode() + piece + b"\n")
        return first

    def rotate(self, container: str, restart: int, stamp: str, keep: int = 5) -> None:
        """The kubelet's rotation: rename to N.log.<stamp>, gzip older rotated files, keep."""
        live = self.live(container, restart)
        cdir = live.parent
        for old in sorted(cdir.glob(f"{restart}.log.*")):
            if not old.name.endswith(".gz"):
                gzip_file(old)
        live.rename(cdir / f"{restart}.log.{stamp}")
        live.touch()
        rotated = sorted(cdir.glob(f"{restart}.log.*"))
        for old in rotated[: max(len(rotated) - (keep - 1), 0)]:
            old.unlink()


def gzip_file(path: Path) -> Path:
    """`path` -> `path.gz` (a new inode), the original removed, as both engines compress."""
    target = path.with_name(path.name + ".gz")
    with open(path, "rb") as src, gzip.open(target, "wb") as dst:
        shutil.copyfileobj(src, dst)
    path.unlink()
    return target


# One SGLang start as the tests write it: server_args past 16 KiB, the summary, ready, noise.
def server_args(day: str) -> str:
    bs = ", ".join(str(i) for i in range(6000))  # past 16 KiB: written in pieces
    return (
        f"[{day} 10:00:01] server_args=ServerArgs(model_path='/models/Qwen3-8B', tp_size=2, "
        f"api_key='sk-file-secret-42', cuda_graph_bs=[{bs}], attention_backend='fa3', dp_size=1)"
    )


def sglang_start(write: Any, day: str, mrr: int, noise: int = 0) -> None:
    line = server_args(day)
    assert len(line) > 2 * PIECE
    write(line)
    write(
        f"[{day} 10:00:50 TP0] max_total_num_tokens=400000, chunked_prefill_size=8192, "
        f"max_prefill_tokens=16384, max_running_requests={mrr}, context_len=40960, "
        "available_gpu_mem=20.00 GB"
    )
    write(f"[{day} 10:00:55] The server is fired up and ready to roll!")
    for i in range(noise):
        write(f'[{day} 10:01:00] INFO:     127.0.0.1:{40000 + i} - "GET /health HTTP/1.1" 200 OK')


def file_source(layout: Layout, reader: str) -> FileSource:
    """A one-shot FileSource over `layout`, opened, with the C line reader (`reader` "c", which
    must be built) or every line cut in Python ("python")."""
    source = FileSource([layout])
    if reader == "python":
        source._run = None
    else:
        assert readers._fileread is not None, "the C file reader is not built"
        assert source._run is readers._fileread.run
    source.open(follow=False)
    return source
