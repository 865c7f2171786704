"""The file source on damaged or unusual log files, with the C reader of common lines and
without it: a hole of NUL bytes a host crash left, an escaped lone surrogate in a record."""

from __future__ import annotations

from pathlib import Path

import pytest
from logfiles import Clock, DockerDir, PodDir, rfc3339

from sglang_sentinel.model import JournalEntry, parse_selector
from sglang_sentinel.sources import DockerLayout, FileSource, Layout, PodLayout, readers
from sglang_sentinel.text import clean_message

CID = "d" * 64
READERS = ["c", "python"]


def source_of(layout: Layout, reader: str) -> FileSource:
    source = FileSource([layout])
    if reader == "python":
        source._run = None  # every line cut in Python
    else:
        assert readers._fileread is not None, "the C file reader is not built"
    source.open(follow=False)
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
