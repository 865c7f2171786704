"""The file source on generated Docker json-file and kubelet pod-log layouts: every line once,
in order, across rename rotation, delete-and-recreate, gzip, truncation, files vanishing, split
lines, restarts of the reader at any position."""

from __future__ import annotations

import json
import os
import select
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from logfiles import PIECE, Clock, DockerDir, PodDir, gzip_file

from sglang_sentinel.errors import JournalError
from sglang_sentinel.model import JournalEntry, parse_selector, workload_of
from sglang_sentinel.sources import DockerLayout, FileSource, PodLayout, Stream, parse_time_us

CID = "a" * 64
CID2 = "b" * 64

Line = tuple[str, str | None, str, int]


def drain(source: FileSource, limit: int | None = None) -> list[Line]:
    """(target, start id, text, time) of each line the source hands out now (after taking in
    the inotify events, as the daemon does when the fd wakes it)."""
    source.acknowledge_changes()
    out: list[Line] = []
    target: str | None = None
    inv: str | None = None
    for item in source.lines(limit):
        if isinstance(item, JournalEntry):
            target, inv = item.unit, item.invocation_id
            out.append((item.unit, item.invocation_id, item.message, item.realtime_us))
        else:
            assert target is not None
            out.append((target, inv, item.decode(), source.realtime_us()))
    return out


def texts(lines: list[Line]) -> list[str]:
    return [line[2] for line in lines]


def docker_source(root: Path, follow: bool = False) -> FileSource:
    source = FileSource([DockerLayout(root, ["sglang"])])
    source.open(follow=follow)
    source.seek_head()
    return source


def resumed(root: Path, cursor: str | None) -> FileSource:
    """A new reader (a restarted daemon) from a saved cursor."""
    source = FileSource([DockerLayout(root, ["sglang"])])
    source.open(follow=False)
    if cursor is None:
        source.seek_head()
    else:
        assert source.seek_cursor(cursor)
    return source


def test_time_parse_rfc3339_nanoseconds_and_offsets() -> None:
    assert parse_time_us(b"2026-01-01T00:00:00.123456789Z") == 1_767_225_600_123_456
    assert parse_time_us(b"2026-01-01T02:00:00.5+02:00") == 1_767_225_600_500_000
    assert parse_time_us(b"2026-01-01T00:00:00Z") == 1_767_225_600_000_000
    assert parse_time_us(b"not a time") is None


def test_docker_lines_targets_and_split_line_joined(tmp_path: Path) -> None:
    """A line over 16 KiB comes in pieces without the newline; the rule sees it whole."""
    c = DockerDir(tmp_path, CID, "sglang")
    DockerDir(tmp_path, CID2, "other").line("not watched")
    long = "server_args=ServerArgs(" + "x" * (3 * PIECE) + ")"
    t0 = c.line("first")
    t1 = c.line(long)
    c.line("after")
    lines = drain(docker_source(tmp_path))
    assert texts(lines) == ["first", long, "after"]
    assert {line[0] for line in lines} == {"docker:sglang"}
    assert [line[3] for line in lines[:2]] == [t0, t1]  # a joined line has its first piece's time
    assert len({line[1] for line in lines}) == 1


def test_lines_with_quotes_count_once_against_the_limit(tmp_path: Path) -> None:
    """`lines(limit)` hands out `limit` lines, also of text with quotes (json-file's `\\"`):
    their count of quotes was taken for the count of lines handed out (one line with six
    quotes ended a batch of three)."""
    c = DockerDir(tmp_path, CID, "sglang")
    for i in range(7):
        c.line(f'line {i} "GET /health" "200" "ok"')
    source = docker_source(tmp_path)
    got = [texts(drain(source, limit=3)) for _ in range(3)]
    assert got == [
        ['line 0 "GET /health" "200" "ok"', 'line 1 "GET /health" "200" "ok"',
         'line 2 "GET /health" "200" "ok"'],
        ['line 3 "GET /health" "200" "ok"', 'line 4 "GET /health" "200" "ok"',
         'line 5 "GET /health" "200" "ok"'],
        ['line 6 "GET /health" "200" "ok"'],
    ]  # fmt: skip


def test_position_stays_before_the_first_piece_until_the_line_is_whole(tmp_path: Path) -> None:
    c = DockerDir(tmp_path, CID, "sglang")
    c.line("whole")
    long = "y" * (2 * PIECE + 10)
    c.line(long)
    data = c.live.read_bytes()
    lines = data.splitlines(keepends=True)
    # Cut the file after the first piece of the long line (the writer is in the middle of it).
    c.live.write_bytes(lines[0] + lines[1])
    source = docker_source(tmp_path)
    assert texts(drain(source)) == ["whole"]
    assert source.partial_pending
    cursor = source.cursor()
    assert cursor is not None
    saved = json.loads(cursor)["s"][f"docker/{CID}"]
    assert saved["o"] == len(lines[0])
    # A restart at that cursor reads the whole line once its last piece is there.
    with open(c.live, "ab") as fh:
        fh.write(b"".join(lines[2:]))
    again = resumed(tmp_path, cursor)
    assert texts(drain(again)) == [long]
    assert not again.partial_pending
    # The first reader, going on, reads the same.
    assert texts(drain(source)) == [long]


def test_rename_rotation_while_following_reads_every_line_once(tmp_path: Path) -> None:
    c = DockerDir(tmp_path, CID, "sglang")
    source = docker_source(tmp_path, follow=True)
    expected: list[str] = []
    got: list[str] = []
    for round_ in range(6):
        for i in range(5):
            expected.append(f"r{round_} l{i}")
            c.line(expected[-1])
        got += texts(drain(source, limit=3))  # part of it, then the rotation, then the rest
        c.rotate(max_file=3, compress=round_ % 2 == 1)
        got += texts(drain(source))
    assert got == expected
    source.close()


def test_delete_and_recreate_with_one_file(tmp_path: Path) -> None:
    """max-file 1: the file is removed and made again; what was unread in it is read first."""
    c = DockerDir(tmp_path, CID, "sglang")
    c.line("a")
    source = docker_source(tmp_path, follow=True)
    assert texts(drain(source)) == ["a"]
    c.line("b")  # written, not yet read, when the file is removed
    c.rotate(max_file=1)
    c.line("c")
    assert texts(drain(source)) == ["b", "c"]
    source.close()


def test_catch_up_through_gzipped_rotated_files_from_a_cursor(tmp_path: Path) -> None:
    c = DockerDir(tmp_path, CID, "sglang")
    for i in range(4):
        c.line(f"one {i}")
    source = docker_source(tmp_path)
    assert texts(drain(source, limit=2)) == ["one 0", "one 1"]
    cursor = source.cursor()
    source.close()
    # While the reader is down: two rotations with compression, the file it was in now .2.gz.
    c.rotate(max_file=5, compress=True)
    c.line("two 0")
    c.rotate(max_file=5, compress=True)
    c.line("three 0")
    assert sorted(p.name for p in c.dir.glob("*.gz")) == [
        f"{CID}-json.log.1.gz",
        f"{CID}-json.log.2.gz",
    ]
    again = resumed(tmp_path, cursor)
    assert texts(drain(again)) == ["one 2", "one 3", "two 0", "three 0"]


def test_rotated_away_while_stopped_reads_what_is_left(tmp_path: Path) -> None:
    """The file of the saved position was removed (max-file reached): the rest is newer."""
    c = DockerDir(tmp_path, CID, "sglang")
    c.line("old")
    source = docker_source(tmp_path)
    drain(source)
    cursor = source.cursor()
    c.rotate(max_file=2)
    c.line("mid")
    c.rotate(max_file=2)  # "old"'s file is gone
    c.line("new")
    assert texts(drain(resumed(tmp_path, cursor))) == ["mid", "new"]


class SteppedBack(Clock):
    """Line times of a clock stepped back between two rotations (NTP): the lines after the
    second rotation are older than the last one read before it."""

    def step_back(self) -> None:
        self.us -= 10_000_000


@pytest.mark.parametrize("following", [True, False], ids=["following", "restarted"])
def test_two_rotations_between_reads_finish_each_file_once(tmp_path: Path, following: bool) -> None:
    """max-file 2, two rotations before the reader looks again: the file it was in is gone,
    every file left is newer and is read whole, whatever its lines' times (were skipped up to
    the time of the last line read, losing a burst in one microsecond or a clock stepped back)."""
    clock = SteppedBack()
    c = DockerDir(tmp_path, CID, "sglang", clock)
    for i in range(4):
        c.line(f"a{i}")
    source = docker_source(tmp_path, follow=following)
    assert texts(drain(source, limit=2)) == ["a0", "a1"]
    cursor = source.cursor()
    if not following:
        source.close()
    c.rotate(max_file=2)
    clock.step_back()
    c.line("b0")
    c.line("b1")
    c.rotate(max_file=2)  # the file of a0-a3 is removed
    c.line("c0")
    assert not (c.dir / f"{CID}-json.log.2").exists()
    if following:
        # Read through the open file to its end, then the newer ones.
        assert texts(drain(source)) == ["a2", "a3", "b0", "b1", "c0"]
        source.close()
    else:
        assert texts(drain(resumed(tmp_path, cursor))) == ["b0", "b1", "c0"]


def test_two_pod_rotations_between_reads_finish_each_file_once(tmp_path: Path) -> None:
    """The kubelet keeping 2 files: rotated twice while the reader was away, lines in one
    microsecond: each file left is read once, whole."""

    class Burst(Clock):
        def next(self, step_us: int = 1000) -> int:
            return self.us

    pod = PodDir(tmp_path, "llm", "sglang-0", "uid-1", Burst())
    selector = [parse_selector("llm/sglang-0/server")]
    for i in range(3):
        pod.line("server", 0, f"a{i}")
    source = FileSource([PodLayout(tmp_path, selector)])
    source.open(follow=True)
    source.seek_head()
    assert texts(drain(source, limit=1)) == ["a0"]
    cursor = source.cursor()
    pod.rotate("server", 0, "20260101-100000", keep=2)
    pod.line("server", 0, "b0")
    pod.rotate("server", 0, "20260101-100100", keep=2)  # the a-file is removed
    pod.line("server", 0, "c0")
    assert texts(drain(source)) == ["a1", "a2", "b0", "c0"]
    source.close()
    again = FileSource([PodLayout(tmp_path, selector)])
    again.open(follow=False)
    assert cursor is not None and again.seek_cursor(cursor)
    assert texts(drain(again)) == ["b0", "c0"]


def test_truncated_file_is_read_again_from_its_start(tmp_path: Path) -> None:
    c = DockerDir(tmp_path, CID, "sglang")
    c.line("before truncation")
    source = docker_source(tmp_path)
    drain(source)
    os.truncate(c.live, 0)
    c.line("x")
    assert texts(drain(source)) == ["x"]
    assert source.truncated_reads == 1


def test_reused_inode_with_other_content_is_a_new_file(tmp_path: Path) -> None:
    """Same device and inode, another first line (copytruncate + rewrite): read from 0."""
    c = DockerDir(tmp_path, CID, "sglang")
    c.line("first content, long enough")
    source = docker_source(tmp_path)
    drain(source)
    cursor = source.cursor()
    source.close()
    ino = c.live.stat().st_ino
    with open(c.live, "r+b") as fh:  # rewritten in place: same inode, longer, other content
        fh.truncate(0)
    c.line("other content")
    c.line("more")
    c.line("and more")
    assert c.live.stat().st_ino == ino
    assert texts(drain(resumed(tmp_path, cursor))) == ["other content", "more", "and more"]


def test_file_vanishing_mid_read_is_read_to_its_end(tmp_path: Path) -> None:
    c = DockerDir(tmp_path, CID, "sglang")
    for i in range(10):
        c.line(f"l{i}")
    source = docker_source(tmp_path)
    assert texts(drain(source, limit=4)) == ["l0", "l1", "l2", "l3"]
    c.live.unlink()  # the container removed while its file is being read
    assert texts(drain(source)) == [f"l{i}" for i in range(4, 10)]
    assert texts(drain(source)) == []


def test_malformed_lines_are_counted_and_skipped(tmp_path: Path) -> None:
    c = DockerDir(tmp_path, CID, "sglang")
    c.line("good")
    with open(c.live, "ab") as fh:
        fh.write(b"{not json\n")
        fh.write(b'{"log": "no time\\n"}\n')
    c.line("good again")
    source = docker_source(tmp_path)
    assert texts(drain(source)) == ["good", "good again"]
    assert source.corrupt_reads == 2


def test_docker_restart_and_recreate_are_new_starts(tmp_path: Path) -> None:
    """A restart appends to the same file (a new start at its server_args line); a container
    made again under the name is a new id, a new file, a new start; the ids are the same
    however often the files are read."""
    clock = Clock()
    c = DockerDir(tmp_path, CID, "sglang", clock)
    c.line("warming up")
    c.line("server_args=ServerArgs(tp_size=1)")
    c.line("ready")
    c.line("server_args=ServerArgs(tp_size=2)")  # restarted (restart policy)
    c.line("ready")
    DockerDir(tmp_path, CID2, "sglang", clock).line("server_args=ServerArgs(tp_size=4)")
    first = drain(docker_source(tmp_path))
    starts = [line[1] for line in first]
    assert starts[0] == starts[1] == starts[2]
    assert starts[3] == starts[4] != starts[0]
    assert starts[5] not in (starts[0], starts[3])
    assert drain(docker_source(tmp_path)) == first


def test_a_start_spanning_a_restart_of_the_reader_keeps_its_id(tmp_path: Path) -> None:
    c = DockerDir(tmp_path, CID, "sglang")
    c.line("server_args=ServerArgs(tp_size=1)")
    source = docker_source(tmp_path)
    (head,) = drain(source)
    c.line("ready")
    c.line("server_args=ServerArgs(tp_size=2)")
    rest = drain(resumed(tmp_path, source.cursor()))
    assert rest[0][1] == head[1]
    assert rest[1][1] != head[1]


def test_inotify_fd_wakes_on_a_new_line_and_a_new_file(tmp_path: Path) -> None:
    c = DockerDir(tmp_path, CID, "sglang")
    c.line("a")
    source = docker_source(tmp_path, follow=True)
    drain(source)
    poller = select.poll()
    poller.register(source.fileno(), source.poll_events())
    assert poller.poll(0) == []
    c.line("b")
    assert poller.poll(5000) != []
    source.acknowledge_changes()
    assert texts(drain(source)) == ["b"]
    assert poller.poll(0) == []
    c2 = DockerDir(tmp_path, CID2, "sglang")  # recreated: a new container directory
    c2.line("c")
    deadline = time.monotonic() + 5
    got: list[str] = []
    while not got and time.monotonic() < deadline:
        poller.poll(1000)
        source.acknowledge_changes()
        got = texts(drain(source))
    assert got == ["c"]
    source.close()


# -- Kubernetes pod logs -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "workload"),
    [
        ("sglang-7d9f8b6c4d-x2kqz", "sglang"),  # Deployment
        ("sglang-decode-5f6d7c8b9-h4jzt", "sglang-decode"),
        ("node-agent-x2kqz", "node-agent"),  # DaemonSet, Job
        # A long Deployment's pods: NAME-HASH- cut to 58 characters before the random 5
        # (names.SimpleNameGenerator): in the hash, right after it, or after NAME's dash.
        (
            "sglang-qwen3-coder-480b-a35b-instruct-fp8-server-7d9f8b6c4x2kqz",
            "sglang-qwen3-coder-480b-a35b-instruct-fp8-server",
        ),
        (
            "sglang-deepseek-r1-distill-llama-70b-instruct-awq-tp8-7d9fx2kqz",
            "sglang-deepseek-r1-distill-llama-70b-instruct-awq-tp8",
        ),
        (
            "sglang-deepseek-r1-distill-qwen-32b-instruct-tp-7d9f8b6c4dx2kqz",
            "sglang-deepseek-r1-distill-qwen-32b-instruct-tp",
        ),
        (
            "sglang-deepseek-r1-distill-qwen-32b-instruct-awq-tp4-node-x2kqz",
            "sglang-deepseek-r1-distill-qwen-32b-instruct-awq-tp4-node",
        ),
        ("sglang-0", "sglang-0"),  # StatefulSet: the ordinal stays
        ("sglang-1", "sglang-1"),
        ("lws-sglang-0-1", "lws-sglang-0-1"),  # LeaderWorkerSet worker
        ("sglang", "sglang"),
        ("model-server", "model-server"),
    ],
)
def test_workload_of_pod_names(pod: str, workload: str) -> None:
    assert workload_of(pod) == workload


def test_selector_parsing() -> None:
    s = parse_selector("llm/sglang/server")
    assert s.target == "k8s:llm/sglang/server"
    assert parse_selector("k8s:llm/sglang").target == "k8s:llm/sglang"
    for bad in ("llm", "LLM/sglang", "a/b/c/d", "llm/Bad_Name"):
        with pytest.raises(ValueError):
            parse_selector(bad)


def pod_source(root: Path, selector: str = "llm/sglang/server") -> FileSource:
    source = FileSource([PodLayout(root, [parse_selector(selector)])])
    source.open(follow=False)
    source.seek_head()
    return source


def test_pod_logs_starts_pods_pieces_and_rotation(tmp_path: Path) -> None:
    """N.log is one start, a new pod another; P pieces joined; N.log.<time> and .gz read in
    order; another namespace, workload or container is not read."""
    clock = Clock()
    old = PodDir(tmp_path, "llm", "sglang-7d9f8b6c4d-x2kqz", "uid-1", clock)
    PodDir(tmp_path, "other", "sglang-7d9f8b6c4d-x2kqz", "uid-9", clock).line("server", 0, "no")
    PodDir(tmp_path, "llm", "router-5c6d7f8b9-abcde", "uid-8", clock).line("server", 0, "no")
    old.line("sidecar", 0, "not this container")
    old.line("server", 0, "start 0")
    long = "server_args=ServerArgs(" + "z" * (2 * PIECE) + ")"
    old.line("server", 0, long)
    old.rotate("server", 0, "20260101-100000")
    old.line("server", 0, "after rotation")
    old.rotate("server", 0, "20260101-100100")  # the first rotated file is gzipped now
    old.line("server", 1, "restart 1")
    new = PodDir(tmp_path, "llm", "sglang-7d9f8b6c4d-h4jzt", "uid-2", clock)
    new.line("server", 0, "new pod")
    assert (old.dir / "server" / "0.log.20260101-100000.gz").exists()
    lines = drain(pod_source(tmp_path))
    assert texts(lines) == ["start 0", long, "after rotation", "restart 1", "new pod"]
    assert {line[0] for line in lines} == {"k8s:llm/sglang/server"}
    ids = [line[1] for line in lines]
    assert ids[0] == ids[1] == ids[2]
    assert len({ids[0], ids[3], ids[4]}) == 3
    # The same ids on every read, also once the pod's files are gone (ids come from the path).
    assert drain(pod_source(tmp_path)) == lines


def test_containers_of_one_pod_named_apart_are_each_read(tmp_path: Path) -> None:
    """`NS/W/server` and `NS/W/router` are two targets of one pod: each container is read, under
    the first selector naming it (only the first selector matching the pod was used: the
    router's lines were never read); a container is read once, also when a later selector of
    the whole pod matches it too."""
    pod = PodDir(tmp_path, "llm", "sglang-7d9f8b6c4d-x2kqz", "uid-1")
    pod.line("server", 0, "server line")
    pod.line("router", 0, "router line")
    pod.line("sidecar", 0, "sidecar line")
    selectors = ["llm/sglang/server", "llm/sglang/router", "llm/sglang"]
    source = FileSource([PodLayout(tmp_path, [parse_selector(s) for s in selectors])])
    source.open(follow=False)
    source.seek_head()
    assert sorted((line[0], line[2]) for line in drain(source)) == [
        ("k8s:llm/sglang", "sidecar line"),
        ("k8s:llm/sglang/router", "router line"),
        ("k8s:llm/sglang/server", "server line"),
    ]


def test_a_restart_with_a_piece_held_then_a_rotation_loses_no_line(tmp_path: Path) -> None:
    """Stopped while a split line's first piece was held (the position before it), then the
    kubelet rotated: from the cursor, the piece is joined with its last piece in the new
    live file and every line there is read. The replay of the lines handed out before the
    stop, offsets in the rotated file, was applied to the new file too: its first lines (as
    many bytes as the position was) were dropped as read, the piece joined with a later line."""
    pod = PodDir(tmp_path, "llm", "sglang-0", "uid-1")
    live = pod.live("server", 0)
    live.write_bytes(
        b"2026-01-01T10:00:00.000000001Z stderr F first\n"
        b"2026-01-01T10:00:00.000000002Z stdout F out one\n"
        b"2026-01-01T10:00:00.000000003Z stderr P piece one \n"
    )
    source = pod_source(tmp_path, "llm/sglang-0/server")
    assert texts(drain(source)) == ["first", "out one"]
    cursor = source.cursor()
    source.close()
    assert cursor is not None
    pod.rotate("server", 0, "20260101-100000")
    with open(live, "ab") as fh:
        fh.write(
            b"2026-01-01T10:00:00.000000004Z stdout F out two\n"
            b"2026-01-01T10:00:00.000000005Z stderr F and two\n"
            b"2026-01-01T10:00:00.000000006Z stderr F last\n"
        )
    again = FileSource([PodLayout(tmp_path, [parse_selector("llm/sglang-0/server")])])
    again.open(follow=False)
    assert again.seek_cursor(cursor)
    assert texts(drain(again)) == ["out two", "piece one and two", "last"]


def test_pod_rotation_while_following_and_resume(tmp_path: Path) -> None:
    pod = PodDir(tmp_path, "llm", "sglang-0", "uid-1")
    source = FileSource([PodLayout(tmp_path, [parse_selector("llm/sglang-0/server")])])
    source.open(follow=True)
    source.seek_head()
    expected: list[str] = []
    got: list[str] = []
    cursor = None
    for r in range(7):
        for i in range(4):
            expected.append(f"r{r} {i}")
            pod.line("server", 0, expected[-1])
        got += texts(drain(source, limit=2))
        pod.rotate("server", 0, f"20260101-1000{r:02d}", keep=3)
        got += texts(drain(source))
        if r == 3:
            cursor = source.cursor()
    assert got == expected
    source.close()
    assert cursor is not None
    # From the cursor after round 3 (an empty live file, which got round 4's lines, was
    # rotated and removed since): what is left, rounds 5 (gzipped) and 6, is read, each once.
    again = FileSource([PodLayout(tmp_path, [parse_selector("llm/sglang-0/server")])])
    again.open(follow=False)
    assert again.seek_cursor(cursor)
    assert texts(drain(again)) == expected[20:]


def test_cri_partial_at_end_of_file_waits(tmp_path: Path) -> None:
    pod = PodDir(tmp_path, "llm", "sglang-0", "uid-1")
    live = pod.live("server", 0)
    live.write_bytes(b"2026-01-01T10:00:00.000000001Z stderr P piece one \n")
    source = pod_source(tmp_path, "llm/sglang-0/server")
    assert drain(source) == []
    assert source.partial_pending
    with open(live, "ab") as fh:
        fh.write(b"2026-01-01T10:00:00.000000002Z stderr F and two\n")
    assert texts(drain(source)) == ["piece one and two"]


def test_gzip_helper_makes_a_new_inode(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x\n")
    ino = path.stat().st_ino
    assert gzip_file(path).stat().st_ino != ino


def test_pieces_of_stdout_and_stderr_interleaved_join_per_output(tmp_path: Path) -> None:
    """A runtime copies stdout and stderr apart (podman's k8s-file showed it): a stdout line
    between the pieces of a stderr line is its own line, and a restart while the stderr line
    is held hands out neither it twice nor the stdout line again."""
    pod = PodDir(tmp_path, "llm", "sglang-0", "uid-1")
    live = pod.live("server", 0)
    live.write_bytes(
        b"2026-01-01T10:00:00.000000001+00:00 stderr P server_args=ServerArgs(a=1, \n"
        b"2026-01-01T10:00:00.000000002+00:00 stdout F health ok\n"
        b"2026-01-01T10:00:00.000000003+00:00 stderr P b=2, \n"
    )
    source = pod_source(tmp_path, "llm/sglang-0/server")
    assert texts(drain(source)) == ["health ok"]
    cursor = source.cursor()
    assert cursor is not None
    with open(live, "ab") as fh:
        fh.write(b"2026-01-01T10:00:00.000000004+00:00 stderr F c=3)\n")
        fh.write(b"2026-01-01T10:00:00.000000005+00:00 stdout F next\n")
    assert texts(drain(source)) == ["server_args=ServerArgs(a=1, b=2, c=3)", "next"]
    again = FileSource([PodLayout(tmp_path, [parse_selector("llm/sglang-0/server")])])
    again.open(follow=False)
    assert again.seek_cursor(cursor)
    assert texts(drain(again)) == ["server_args=ServerArgs(a=1, b=2, c=3)", "next"]


def test_a_missing_layout_directory_is_an_error(tmp_path: Path) -> None:
    source = FileSource([PodLayout(tmp_path / "nope", [parse_selector("llm/sglang")])])
    with pytest.raises(JournalError, match=r"log directory .*nope does not exist"):
        source.open(follow=False)


@pytest.mark.parametrize(
    "text",
    [
        "plain line\n",
        "a piece without its newline",
        'quoted "GET /health HTTP/1.1" 200\n',
        "tab\there, backslash \\ and unicode é ✓\n",
        "<html> & friends\n",
        "",
        "\n",
    ],
)
def test_json_file_fast_path_reads_what_a_json_parser_reads(text: str) -> None:
    """moby's compact form (no spaces, Go's escapes) cut apart by hand or by json.loads: the
    same text, time, output and piece flag."""
    from sglang_sentinel.sources.files import _parse_docker  # the parser itself

    record = {"log": text, "stream": "stderr", "time": "2026-01-01T10:00:00.123456789Z"}
    compact = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
    spaced = json.dumps(record).encode() + b"\n"  # the general path
    assert _parse_docker(compact) == _parse_docker(spaced)
    raw = text.encode()
    expected = (raw.removesuffix(b"\n"), not raw.endswith(b"\n"))
    got = _parse_docker(compact)
    assert got is not None
    assert (got[0], got[3]) == expected
    assert got[1:3] == (b"2026-01-01T10:00:00.123456789Z", b"stderr")


def test_time_fast_path_equals_the_general_one() -> None:
    cache: dict[bytes, int] = {}
    for text in (
        b"2026-01-01T10:00:00.123456789Z",
        b"2026-01-01T10:00:00.999999999Z",
        b"2026-01-01T10:00:01.000000001Z",
        b"2026-01-01T10:00:00.12345678xZ",
    ):
        assert parse_time_us(text, cache) == parse_time_us(text)


def _open_deleted_files(under: Path) -> list[str]:
    """The files under `under` this process holds open after they were deleted."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(under)) and target.endswith(" (deleted)"):
            held.append(target)
    return held


def test_a_removed_containers_file_is_let_go_once_read_to_its_end(tmp_path: Path) -> None:
    """`docker rm` (or a deleted pod) while followed: its last file is read to its end, then
    closed. Before: held open for as long as the daemon ran, one descriptor per removed
    container or pod (a daemon beside a crash-looping Deployment ran out of them)."""
    (tmp_path / "containers").mkdir()
    source = docker_source(tmp_path, follow=True)
    clock = Clock()
    for n in range(5):
        c = DockerDir(tmp_path, f"{n:x}" * 64, "sglang", clock)
        c.line(f"start {n}")
        assert texts(drain(source)) == [f"start {n}"]
        c.line(f"last {n}")
        for path in sorted(c.dir.rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        c.dir.rmdir()
        assert texts(drain(source)) == [f"last {n}"]  # read to its end first
        assert texts(drain(source)) == []
        assert _open_deleted_files(tmp_path) == [], n
    source.close()


def _holds_open(path: Path) -> bool:
    """Whether this process has `path` open (under that name)."""
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == str(path):
                return True
        except OSError:
            continue
    return False


class RotatedWhileOpen:
    """A DockerLayout whose files are rotated (`rotate`, once) right before the reader lists
    them while it holds `held` open: a rotation between two of the reader's listings, at the
    one moment that matters, without a race."""

    def __init__(self, layout: DockerLayout, held: Path, rotate: Callable[[], None]) -> None:
        self.inner, self.root, self.held = layout, layout.root, held
        self.rotate: Callable[[], None] | None = rotate

    @property
    def targets(self) -> tuple[str, ...]:
        return self.inner.targets

    def streams(self) -> list[Stream]:
        return self.inner.streams()

    def directories(self) -> list[Path]:
        return self.inner.directories()

    def files(self, stream: Stream) -> tuple[Path, ...]:
        if self.rotate is not None and _holds_open(self.held):
            rotate, self.rotate = self.rotate, None
            rotate()
        return self.inner.files(stream)


@pytest.mark.parametrize("position", [None, "empty live file"], ids=["no-position", "cursor"])
def test_an_empty_gzipped_file_renamed_while_read_does_not_pass_over_the_next(
    tmp_path: Path, position: str | None
) -> None:
    """A restarted reader (no position for the stream, or one on a file since rotated away)
    starts at the oldest file, an empty `.1.gz` (rotated before any line); the next rotation
    renames it to `.2.gz` and compresses the live file into a new `.1.gz` before the reader
    lists the files again: that new `.1.gz` is read, not taken for the file the reader was in
    (by its name) and passed over. Before: its lines were lost (a whole startup, in
    tests/daemon/test_file_daemon.py once in CI)."""
    c = DockerDir(tmp_path, CID, "sglang")
    cursor = None
    if position is not None:
        c.live.touch()
        before = docker_source(tmp_path)
        assert texts(drain(before)) == []
        cursor = before.cursor()
        assert cursor is not None
        before.close()
    c.rotate(max_file=20, compress=True)  # nothing written yet: `.1.gz` is empty
    c.line("one 0")
    c.line("one 1")
    empty = c.dir / f"{CID}-json.log.1.gz"

    def rotate() -> None:
        c.rotate(max_file=20, compress=True)
        c.line("two 0")

    layout = RotatedWhileOpen(DockerLayout(tmp_path, ["sglang"]), empty, rotate)
    source = FileSource([layout])
    source.open(follow=False)
    if cursor is None:
        source.seek_head()
    else:
        assert source.seek_cursor(cursor)
    assert texts(drain(source)) == ["one 0", "one 1", "two 0"]
    assert layout.rotate is None  # it ran while the reader held the empty file
    assert sorted(p.name for p in c.dir.glob("*-json.log*")) == [
        f"{CID}-json.log",
        f"{CID}-json.log.1.gz",
        f"{CID}-json.log.2.gz",
    ]
    source.close()


@pytest.mark.parametrize("length", [57, 58, 63, 70])
def test_a_long_daemonset_or_jobs_pods_are_its_own(length: int) -> None:
    """A DaemonSet or Job named past 57 characters: the API server cuts `NAME-` to 58 before the
    random 5 (names.SimpleNameGenerator), so its pods matched no selector and were never read."""
    name = ("sglang-router-qwen3-coder-480b-a35b-instruct-fp8-daemonset-" * 2)[:length].rstrip("-")
    pod = (name + "-")[:58] + "x2kqz"
    selector = parse_selector(f"llm/{name}/server")
    assert selector.matches("llm", pod)
    assert not selector.matches("other", pod)
    assert not selector.matches("llm", (name + "-")[:58] + "x2kq")  # no generated suffix
    assert not selector.matches("llm", "another-" + pod[8:])
