"""The file source's memory stays bounded however many streams come and go (issue 20's long
lives): a crash-looping pod makes a stream per restart, a Docker host a container per `run`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from logfiles import Clock, rfc3339

from sglang_sentinel.model import JournalEntry, PodRef
from sglang_sentinel.sources import FileSource, Stream, files
from sglang_sentinel.sources.podlogs import start_id

TARGET = "k8s:llm/sglang-0/server"
# The bound scaled down (4096 + 256 in the source) to keep the test short: 1,000 restarts are
# five times what is kept, as 20,000 would be at the real bound.
KEPT, SLACK = 200, 12
RESTARTS = 1000


class CrashLoop:
    """A pod's container restarting over and over: each start its own `N.log` (a stream), the
    one before removed as the next begins (the kubelet keeps one dead container's log)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.clock = Clock()
        self.listed: list[Stream] = []

    @property
    def targets(self) -> tuple[str, ...]:
        return (TARGET,)

    def streams(self) -> list[Stream]:
        return list(self.listed)

    def directories(self) -> list[Path]:
        return [self.root]

    def files(self, stream: Stream) -> tuple[Path, ...]:
        return tuple(p for p in stream.files if p.exists())

    def restart(self, n: int) -> None:
        """Start N: its log written, the one before removed."""
        path = self.root / f"{n}.log"
        t = [rfc3339(self.clock.next()) for _ in range(2)]
        path.write_bytes(
            f"{t[0]} stderr F server_args=ServerArgs(n={n})\n{t[1]} stderr F ready {n}\n".encode()
        )
        for old in self.listed:
            old.files[0].unlink()
        self.listed = [
            Stream(
                key=f"k8s/llm_sglang-0_uid/server/{n}",
                target=TARGET,
                fmt="cri",
                files=(path,),
                start=start_id("uid", "server", str(n)),
                seed=str(path),
                pod=PodRef("sglang-0", "uid"),
            )
        ]


class Unpruned(FileSource):
    """The same source without the pruning: what the cursor would be if memory kept all."""

    def _prune(self, left: set[str]) -> None:
        pass


def _drain(source: FileSource) -> list[str]:
    return [
        item.message if isinstance(item, JournalEntry) else item.decode() for item in source.lines()
    ]


def test_streams_that_come_and_go_leave_bounded_memory_and_the_same_cursor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1,000 restarts of a pod, one stream each: the source keeps the listed streams' layout
    and first line's time only, and at most POSITIONS_KEPT (plus the trim's slack) gone
    streams' positions, the newest; its cursor is, at every point, the one a source keeping
    everything saves. Before: 1,000 of each, growing with every restart."""
    monkeypatch.setattr(files, "POSITIONS_KEPT", KEPT)
    monkeypatch.setattr(files, "POSITIONS_SLACK", SLACK)
    layout = CrashLoop(tmp_path)
    source = FileSource([layout])
    reference = Unpruned([layout])
    for s in (source, reference):
        s.open(follow=False)
        s.seek_head()
    for n in range(RESTARTS):
        layout.restart(n)
        expected = [f"server_args=ServerArgs(n={n})", f"ready {n}"]
        assert _drain(source) == expected
        assert _drain(reference) == expected
        if n % 100 == 99 or n in (KEPT, KEPT + SLACK + 1):
            assert source.cursor() == reference.cursor(), n
    # The stream listed and the one before (read to its end in this round, let go next).
    listed = {f"k8s/llm_sglang-0_uid/server/{n}" for n in (RESTARTS - 2, RESTARTS - 1)}
    assert set(source._layout_of) == set(source._first_us) == listed
    assert len(source._positions) <= 2 + KEPT + SLACK
    assert len(reference._positions) == RESTARTS  # what main kept of each, in memory
    cursor = source.cursor()
    assert cursor is not None and cursor == reference.cursor()
    saved = json.loads(cursor)["s"]
    # Those two and the KEPT newest gone ones.
    assert sorted(saved, key=lambda key: int(key.rsplit("/", 1)[1])) == [
        f"k8s/llm_sglang-0_uid/server/{n}" for n in range(RESTARTS - 2 - KEPT, RESTARTS)
    ]
    # A restart from it reads nothing again.
    again = FileSource([layout])
    again.open(follow=False)
    assert again.seek_cursor(cursor)
    assert _drain(again) == []
    layout.restart(RESTARTS)
    assert _drain(again) == [f"server_args=ServerArgs(n={RESTARTS})", f"ready {RESTARTS}"]
