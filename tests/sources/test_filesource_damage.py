"""The file source on damaged or unusual log files, with the C reader of common lines and
without it: a hole of NUL bytes a host crash left, an escaped lone surrogate in a record, a
file truncated in place (logrotate's copytruncate, `truncate -s 0`) while read or stopped."""

from __future__ import annotations

import gc
import json
import os
import shutil
import tracemalloc
from pathlib import Path

import pytest
from logfiles import Clock, DockerDir, PodDir, file_source, rfc3339

from sglang_sentinel.model import JournalEntry, parse_selector
from sglang_sentinel.sources import DockerLayout, FileSource, Layout, PodLayout
from sglang_sentinel.text import clean_message

CID = "d" * 64
READERS = ["c", "python"]


def source_of(layout: Layout, reader: str) -> FileSource:
    source = file_source(layout, reader)
    source.seek_head()
    return source


def read(source: FileSource) -> list[tuple[str, str | None]]:
    """(text, start id) of each line handed out now."""
    out: list[tuple[str, str | None]] = []
    start: str | None = None
    for item in source.lines():
        if isinstance(item, JournalEntry):
            start = item.invocation_id
            out.append((item.message, start))
        else:
            out.append((clean_message(item), start))
    return out


def crash_hole(path: Path) -> None:
    """What a host crash leaves at a file's end: its size written, its last blocks not (NUL
    bytes to the size; the engine appends its next lines after them)."""
    with open(path, "ab") as fh:
        fh.write(b"\0" * 4096)


@pytest.mark.parametrize("reader", READERS)
def test_a_nul_hole_after_a_crash_loses_no_record_and_merges_no_starts(
    tmp_path: Path, reader: str
) -> None:
    """The first record after the hole is read (it was one corrupt line with the NULs before
    it: the restarted container's server_args line lost and its lines put in the start
    before)."""
    c = DockerDir(tmp_path, CID, "sglang")
    c.line("server_args=ServerArgs(tp_size=1)")
    c.line("ready 1")
    crash_hole(c.live)
    c.line("server_args=ServerArgs(tp_size=2)")  # the container's start after the reboot
    c.line("ready 2")
    source = source_of(DockerLayout(tmp_path, ["sglang"]), reader)
    lines = read(source)
    assert [text for text, _ in lines] == [
        "server_args=ServerArgs(tp_size=1)",
        "ready 1",
        "server_args=ServerArgs(tp_size=2)",
        "ready 2",
    ]
    starts = [start for _, start in lines]
    assert starts[0] == starts[1] != starts[2] == starts[3]
    assert source.corrupt_reads == 0


@pytest.mark.parametrize("reader", READERS)
def test_a_nul_hole_in_a_record_keeps_the_record_after_it(tmp_path: Path, reader: str) -> None:
    """The crash cut a record (its first bytes on disk, then NULs): that one is lost and
    counted, the next one is read."""
    c = DockerDir(tmp_path, CID, "sglang")
    c.line("before")
    with open(c.live, "ab") as fh:
        fh.write(b'{"log":"cut sho')
    crash_hole(c.live)
    c.line("after")
    source = source_of(DockerLayout(tmp_path, ["sglang"]), reader)
    assert [text for text, _ in read(source)] == ["before", "after"]
    assert source.corrupt_reads == 0


@pytest.mark.parametrize("reader", READERS)
def test_a_nul_hole_in_a_pod_log_loses_no_line(tmp_path: Path, reader: str) -> None:
    pods = tmp_path / "pods"
    pod = PodDir(pods, "llm", "sglang-7d9f8b6c4d-x2kqz", "uid-1", Clock())
    pod.line("server", 0, "one")
    crash_hole(pod.live("server", 0))
    pod.line("server", 0, "two")
    pod.line("server", 0, "three")
    layout = PodLayout(pods, [parse_selector("llm/sglang/server")])
    source = source_of(layout, reader)
    assert [text for text, _ in read(source)] == ["one", "two", "three"]
    assert source.corrupt_reads == 0


@pytest.mark.parametrize("reader", READERS)
def test_an_escaped_lone_surrogate_is_a_replacement_character(tmp_path: Path, reader: str) -> None:
    """`\\ud800` alone in `log` (valid JSON, not text): read as U+FFFD; the source raised
    UnicodeEncodeError at that line, on every read from then on."""
    c = DockerDir(tmp_path, CID, "sglang")
    c.line("a")
    with open(c.live, "ab") as fh:
        for escaped in (b"\\ud800", b"\\udfff", b"\\udcff", b"\\ud83d\\ude00"):
            when = rfc3339(c.clock.next()).encode()
            fh.write(b'{"log":"x' + escaped + b'y\\n","stream":"stderr","time":"' + when + b'"}\n')
    c.line("b")
    source = source_of(DockerLayout(tmp_path, ["sglang"]), reader)
    assert [text for text, _ in read(source)] == [
        "a",
        "x\ufffdy",
        "x\ufffdy",
        "x\ufffdy",  # \udcff: surrogateescape's byte 0xff, invalid UTF-8
        "x\U0001f600y",  # a pair is one character
        "b",
    ]
    assert source.corrupt_reads == 0


def resumed(root: Path, cursor: str | None, reader: str) -> FileSource:
    """A new reader (a restarted daemon) at a saved cursor."""
    assert cursor is not None
    source = source_of(DockerLayout(root, ["sglang"]), reader)
    assert source.seek_cursor(cursor)
    return source


def copytruncate(c: DockerDir) -> None:
    """logrotate's copytruncate: the live file copied to `.1`, then truncated in place (the
    engine writes on at its end, O_APPEND: from offset 0)."""
    shutil.copy(c.live, c.dir / f"{c.cid}-json.log.1")
    os.truncate(c.live, 0)


@pytest.mark.parametrize("reader", READERS)
def test_copytruncate_between_reads_reads_the_copys_rest_then_the_new_lines(
    tmp_path: Path, reader: str
) -> None:
    """A line written after the last read and before the copy is read from the copy."""
    c = DockerDir(tmp_path, CID, "sglang")
    c.line("old 0")
    c.line("old 1")
    source = source_of(DockerLayout(tmp_path, ["sglang"]), reader)
    assert [text for text, _ in read(source)] == ["old 0", "old 1"]
    c.line("old 2")
    copytruncate(c)
    c.line("new 0")
    assert [text for text, _ in read(source)] == ["old 2", "new 0"]
    c.line("new 1")
    assert [text for text, _ in read(source)] == ["new 1"]
    assert (source.corrupt_reads, source.truncated_reads) == (0, 0)
    # A restart goes on where it was: nothing twice.
    c.line("new 2")
    assert [text for text, _ in read(resumed(tmp_path, source.cursor(), reader))] == ["new 2"]


@pytest.mark.parametrize("reader", READERS)
def test_truncated_and_written_past_the_position_between_reads_is_read_from_its_start(
    tmp_path: Path, reader: str
) -> None:
    """No copy, and the file longer again than the position by the next read: it was read
    from the position, the middle of a line (corrupt) and the lines before it lost."""
    c = DockerDir(tmp_path, CID, "sglang")
    c.line("old")
    source = source_of(DockerLayout(tmp_path, ["sglang"]), reader)
    assert [text for text, _ in read(source)] == ["old"]
    os.truncate(c.live, 0)
    for i in range(3):
        c.line(f"new {i}")
    assert [text for text, _ in read(source)] == ["new 0", "new 1", "new 2"]
    assert (source.corrupt_reads, source.truncated_reads) == (0, 1)


@pytest.mark.parametrize("reader", READERS)
def test_a_file_truncated_while_read_is_found_again_after_a_restart(
    tmp_path: Path, reader: str
) -> None:
    """The position takes the file's new first line: a restart read it whole again (its saved
    identity was the first line before the truncation)."""
    c = DockerDir(tmp_path, CID, "sglang")
    for i in range(3):
        c.line(f"old {i}")
    source = source_of(DockerLayout(tmp_path, ["sglang"]), reader)
    assert len(read(source)) == 3
    os.truncate(c.live, 0)
    c.line("new 0")
    assert [text for text, _ in read(source)] == ["new 0"]
    c.line("new 1")
    assert [text for text, _ in read(source)] == ["new 1"]
    again = resumed(tmp_path, source.cursor(), reader)
    assert read(again) == []
    c.line("new 2")
    assert [text for text, _ in read(again)] == ["new 2"]


@pytest.mark.parametrize("reader", READERS)
def test_copytruncate_while_stopped_reads_every_line_once(tmp_path: Path, reader: str) -> None:
    """The saved file is the copy now (another inode, the same first line): the rest of it,
    then the live file; the copy was read whole again, every line before the stop twice."""
    c = DockerDir(tmp_path, CID, "sglang")
    c.line("server_args=ServerArgs(tp_size=1)")
    c.line("old 1")
    source = source_of(DockerLayout(tmp_path, ["sglang"]), reader)
    first = read(source)
    assert len(first) == 2
    cursor = source.cursor()
    source.close()
    c.line("old 2")
    copytruncate(c)
    c.line("new 0")
    rest = read(resumed(tmp_path, cursor, reader))
    assert [text for text, _ in rest] == ["old 2", "new 0"]
    assert {start for _, start in rest} == {first[0][1]}


def test_the_layout_forgets_removed_containers_and_keeps_only_their_names(
    tmp_path: Path,
) -> None:
    """Every container of the host is listed (its name is only in its config.v2.json). The
    layout kept the whole parsed config of every container it ever saw, for the daemon's
    life: a host running thousands of short jobs grew it without bound. Now only the names of
    the containers there, as of the last listing."""
    layout = DockerLayout(tmp_path, ["sglang"])
    DockerDir(tmp_path, CID, "sglang").line("watched")
    env = [f"VAR_{i}={'v' * 40}" for i in range(100)]  # a config.v2.json of ~6 KB, as real ones
    jobs = []
    for n in range(100):
        cid = f"{n:02x}" * 32
        jobs.append(tmp_path / "containers" / cid)
        jobs[-1].mkdir()
        doc = {"ID": cid, "Name": f"/job-{n}", "Config": {"Env": env}}
        (jobs[-1] / "config.v2.json").write_text(json.dumps(doc))
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        assert [s.target for s in layout.streams()] == ["docker:sglang"]
        listed = tracemalloc.get_traced_memory()[0] - before
        for job in jobs[1:]:
            shutil.rmtree(job)
        assert [s.target for s in layout.streams()] == ["docker:sglang"]
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert listed < 300_000, listed  # 101 paths, names and stamps (was 1.2 MB of configs)
    assert kept < 20_000, kept  # 2 of them (was all 101, 1.2 MB)
    names = {path.parent.name: name for path, (_, name) in layout._names.items()}
    assert names == {jobs[0].name: "job-0", CID: "sglang"}
