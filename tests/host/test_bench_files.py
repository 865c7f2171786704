"""bench/files.py and bench/live_files.py cannot rot: the json-file and CRI logs hold the same
lines (else `make bench` would compare scans of different work), and the live writer's
rotated files hold every line it counted, in order."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench import files, live_files  # noqa: E402
from sglang_sentinel.model import JournalEntry, parse_selector  # noqa: E402
from sglang_sentinel.sources import DockerLayout, FileSource, Layout, PodLayout  # noqa: E402


def texts(layout: Layout) -> list[str]:
    source = FileSource([layout])
    source.open(follow=False)
    source.seek_head()
    out = [
        item.message if isinstance(item, JournalEntry) else item.decode() for item in source.lines()
    ]
    source.close()
    return out


def test_json_file_and_cri_logs_hold_the_same_lines(tmp_path: Path) -> None:
    json_log, cri_logs, written = files.write_logs(tmp_path, 3000, piece=4096)
    assert len(cri_logs) == 4  # one N.log a start of generate.py's "single" shape
    from_json = texts(DockerLayout(tmp_path / "docker", ["sglang"]))
    from_cri = texts(PodLayout(tmp_path / "pods", [parse_selector("llm/sglang-0/server")]))
    assert from_json == from_cri
    # The server_args lines (~10 KB) came in 4 KiB pieces (a record a piece, all but the last
    # without the newline) and were joined.
    partial = [r for r in json_log.read_bytes().splitlines() if b'\\n","stream"' not in r]
    assert len(partial) > 0
    assert len(from_json) == written - len(partial)


def test_live_writer_rotates_and_every_counted_line_is_there(tmp_path: Path) -> None:
    log = tmp_path / "x-json.log"
    count = tmp_path / "count"
    live_files.writer(4000, 0.3, count, log, 64 << 10)
    written, _seconds, rotations = count.read_text().split()
    kept = [log.with_name(f"{log.name}.{n}") for n in (2, 1)] + [log]
    records = [
        json.loads(line)
        for path in kept
        if path.exists()
        for line in path.read_bytes().splitlines()
    ]
    assert log.with_name(f"{log.name}.2").exists()
    # max-file 3 removed the oldest: what is kept is the newest lines, each once, in order.
    assert int(rotations) >= 2
    assert 0 < len(records) <= int(written)
    assert all(r["log"].endswith("\n") and r["stream"] == "stderr" for r in records)
    assert [r["time"] for r in records] == sorted(r["time"] for r in records)


def test_the_paced_writer_writes_every_due_line_after_a_stall() -> None:
    """A machine stalled past the run's end (here: the first steady slice takes 0.5 s of a 0.2 s
    run) still gets every line due: the loop ended with most of them unwritten, and a short
    run then made too few rotations for the test above."""
    from bench.live import write_paced

    emitted: list[int] = []

    def emit(texts: list[str]) -> None:
        if len(emitted) == 1:
            time.sleep(0.5)
        emitted.append(len(texts))

    written, _started = write_paced(4000, 0.2, emit)
    startup = emitted[0]
    assert written == sum(emitted) == startup + 800
