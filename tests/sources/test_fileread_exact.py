"""The file source's block reader hands out exactly what the line-by-line parse does (json.loads
for any JSON, the CRI split, the general RFC 3339 parse): any mix of Docker's compact lines,
escapes, pieces, other time forms and corrupt lines, read whole, in chunks, or resumed from a
cursor at any point; with the C reader of common lines (_fileread.c) and without it."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from logfiles import file_source

from sglang_sentinel.model import JournalEntry, parse_selector
from sglang_sentinel.sources import (
    DockerLayout,
    FileSource,
    Layout,
    PodLayout,
    parse_time_us,
    readers,
)
from sglang_sentinel.sources.files import _parse_cri, _parse_docker, start_id
from sglang_sentinel.text import clean_message

CID = "c" * 64
WORDS = ["a", "b c", '"', "\\", "\t", "<", "&", "é", "✓", " ", "server_args=", "\x1b[1m", "\r", ":"]
TIMES = st.sampled_from(
    [
        *["2026-01-01T10:00:0{s}.12345678{d}Z"] * 6,  # the engines' own form, most lines
        "2026-01-01T12:00:0{s}.1234{d}+02:00",  # other RFC 3339 forms
        "2026-01-01t10:00:0{s}.{d}z",
        "2026-01-01T10:00:0{s}Z",
        "2026-13-01T10:00:0{s}.12345678{d}Z",  # not a time: a corrupt line
        "2026-01-01T10:00:0{s}.1234567x{d}Z",
    ]
)
RECORD = st.tuples(
    st.lists(st.sampled_from(WORDS), max_size=6).map("".join),
    st.sampled_from([False, False, False, True]),  # a piece (no newline / P)
    st.sampled_from(["stdout", "stderr"]),
    TIMES,
    st.integers(0, 9),
    st.sampled_from(["compact"] * 5 + ["ascii", "spaced", "corrupt", "hole"]),
)


def docker_line(text: str, piece: bool, out: str, ts: str, style: str) -> bytes:
    record = {"log": text + ("" if piece else "\n"), "stream": out, "time": ts}
    if style == "corrupt":
        return b'{"log":"' + text.encode() + b"\n"
    if style == "spaced":
        return json.dumps(record).encode() + b"\n"
    compact = json.dumps(record, separators=(",", ":"), ensure_ascii=style == "ascii")
    if style == "hole":
        # A record cut by a host crash, NUL bytes, then this one: two run together.
        return b'{"log":"' + text.encode()[:3] + b"\0" * 5 + compact.encode() + b"\n"
    return compact.encode() + b"\n"


def cri_line(text: str, piece: bool, out: str, ts: str, style: str) -> bytes:
    text = text.replace("\n", " ").replace("\r", " ")
    tag = "P" if piece else {"spaced": "F:x", "corrupt": "X"}.get(style, "F")
    return f"{ts} {out} {tag} {text}".encode() + b"\n"


def reference(data: bytes, fmt: str, seed: str, fixed: str | None) -> list[tuple[str, object]]:
    """Line by line, as the reader did before it read blocks."""
    out: list[tuple[str, object]] = []
    pieces: dict[bytes, tuple[bytearray, int]] = {}
    start: str | None = None
    args_seen = False
    current: str | None = None
    parse = _parse_docker if fmt == "docker" else _parse_cri

    def parsed_of(line: bytes) -> tuple[bytes, int, bytes, bool] | None:
        parsed = parse(line)
        t = None if parsed is None else parse_time_us(parsed[1])
        if parsed is None or t is None:
            # The record after a hole of NUL bytes is read.
            return parsed_of(line[line.rfind(b"\0") + 1 :]) if b"\0" in line else None
        return parsed[0], t, parsed[2], parsed[3]

    for line in data.splitlines(keepends=True):
        got = parsed_of(line)
        if got is None:
            continue
        text, t, output, partial = got
        held = pieces.get(output)
        if partial:
            if held is None:
                pieces[output] = (bytearray(text), t)
            else:
                held[0].extend(text)
            continue
        if held is not None:
            del pieces[output]
            text, t = bytes(held[0]) + text, held[1]
        if fixed is None:
            if start is None:
                start, args_seen = start_id(seed, t), False
            if b"server_args=" in text:
                if args_seen:
                    start = start_id(seed, t)
                args_seen = True
        inv = fixed if fixed is not None else start
        if inv != current:
            current = inv
            out.append(("entry", (clean_message(text), t, inv)))
        else:
            out.append(("raw", (text, t)))
    return out


def read(source: FileSource, limit: int | None) -> list[tuple[str, object]]:
    got: list[tuple[str, object]] = []
    for item in source.lines(limit):
        if isinstance(item, JournalEntry):
            got.append(("entry", (item.message, item.realtime_us, item.invocation_id)))
        else:
            got.append(("raw", (item, source.realtime_us())))
    return got


def as_lines(items: list[tuple[str, Any]]) -> list[tuple[str, int]]:
    """Text and time only: where a read starts again (a chunk, a restart) makes an entry."""
    return [(clean_message(p[0]) if k == "raw" else p[0], p[1]) for k, p in items]


Record = tuple[str, bool, str, str, int, str]


def check(fmt: str, records: list[Record], chunk: int, reader: str) -> None:
    make = docker_line if fmt == "docker" else cri_line
    data = b"".join(
        make(text, piece, out, ts.format(s=i % 10, d=d), style)
        for i, (text, piece, out, ts, d, style) in enumerate(records)
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if fmt == "docker":
            cdir = root / "containers" / CID
            cdir.mkdir(parents=True)
            (cdir / "config.v2.json").write_text(json.dumps({"ID": CID, "Name": "/sglang"}))
            (cdir / f"{CID}-json.log").write_bytes(data)
            layout: Layout = DockerLayout(root, ["sglang"])
            seed, fixed = CID, None
        else:
            cdir = root / "llm_sglang-0_uid-1" / "server"
            cdir.mkdir(parents=True)
            (cdir / "0.log").write_bytes(data)
            layout = PodLayout(root, [parse_selector("llm/sglang-0/server")])
            seed = ""
            from sglang_sentinel.sources.podlogs import start_id as pod_start

            fixed = pod_start("uid-1", "server", "0")
        expected = reference(data, fmt, seed, fixed)

        whole = file_source(layout, reader)
        whole.seek_head()
        assert read(whole, None) == expected
        whole.close()

        # In chunks, and a restart from the cursor after the first one.
        chunked = file_source(layout, reader)
        chunked.seek_head()
        got = read(chunked, chunk)
        cursor = chunked.cursor()
        rest: list[tuple[str, object]] = []
        while True:
            more = read(chunked, chunk)
            if not more:
                break
            rest += more
        chunked.close()
        assert as_lines(got + rest) == as_lines(expected)
        again = file_source(layout, reader)
        if cursor is None:
            again.seek_head()
        else:
            assert again.seek_cursor(cursor)
        assert as_lines(got + read(again, None)) == as_lines(expected)
        again.close()


@pytest.mark.parametrize("reader", ["c", "python"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(RECORD, max_size=25), st.integers(1, 7))
def test_json_file_blocks_read_what_the_line_parse_reads(
    reader: str, records: list[Record], chunk: int
) -> None:
    check("docker", records, chunk, reader)


@pytest.mark.parametrize("reader", ["c", "python"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(RECORD, max_size=25), st.integers(1, 7))
def test_cri_blocks_read_what_the_line_parse_reads(
    reader: str, records: list[Record], chunk: int
) -> None:
    check("cri", records, chunk, reader)


@pytest.mark.parametrize(
    ("ts", "taken"),
    [
        ("2026-01-01T10:00:00.123456789Z", True),
        ("2024-02-29T23:59:59.999999999Z", True),  # a leap day
        ("2026-02-31T00:00:00.000000000Z", True),  # past the month's end: runs on into March
        ("2026-03-00T00:00:00.000000001Z", True),  # day 0: the month's eve
        ("1969-12-31T23:59:59.500000000Z", True),  # before the epoch
        ("0001-01-01T00:00:00.000000000Z", True),
        ("9999-12-31T99:99:99.999999000Z", True),  # hours, minutes, seconds past their range
        ("2026-13-01T00:00:00.000000000Z", False),  # no month 13 (Python: a corrupt line)
        ("0000-01-01T00:00:00.000000000Z", False),  # no year 0
        ("2026-01-01t00:00:00.000000000Z", False),  # another RFC 3339 form: Python's
        ("2026-01-01T00:00:00.00000000xZ", False),
    ],
)
def test_c_reader_times_are_the_general_parse(ts: str, taken: bool) -> None:
    """The C reader's time of a line is parse_time_us's, or it leaves the line to Python."""
    assert readers._fileread is not None, "the C file reader is not built"
    run = readers._fileread.run
    docker = json.dumps({"log": "x\n", "stream": "stdout", "time": ts}, separators=(",", ":"))
    cri = f"{ts} stdout F x"
    for fmt, line in ((readers._fileread.FMT_DOCKER, docker), (readers._fileread.FMT_CRI, cri)):
        got = run(line.encode() + b"\n", 0, fmt, 10, b"")
        if taken:
            assert got == ([b"x"], [parse_time_us(ts.encode())], [len(line) + 1])
        else:
            assert got == ([], [], [])
