"""A journal file libsystemd cannot open is named (log + metric), not skipped without a word."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from sentinelproc import scrape_in_process

from sglang_sentinel.cli import main
from sglang_sentinel.sources.journal import unreadable_files


@pytest.fixture
def journal_with_a_bad_file(seed_journal_dir: Path, tmp_path: Path) -> Path:
    directory = tmp_path / "journal"
    shutil.copytree(seed_journal_dir, directory)
    (good,) = sorted(directory.glob("*.journal"))
    bad = directory / "system@0000-bad.journal"
    data = bytearray(good.read_bytes())
    data[:8] = b"XXXXXXXX"  # the header's signature: libsystemd refuses the whole file
    bad.write_bytes(bytes(data))
    return directory


def test_unreadable_files_names_only_the_bad_one(journal_with_a_bad_file: Path) -> None:
    found = unreadable_files(journal_with_a_bad_file)
    assert [p.name for p, _ in found] == ["system@0000-bad.journal"]
    assert found[0][1] == "Bad message"


def test_scan_says_so_and_still_reads_the_rest(
    journal_with_a_bad_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["scan", "--json", "--journal-dir", str(journal_with_a_bad_file)]
    assert main([*argv, "--state-dir", str(tmp_path / "s")]) == 0
    out, err = capsys.readouterr()
    assert len(json.loads(out)["startups"]) == 2
    assert "journal_file_unreadable" in err and "system@0000-bad.journal" in err


def test_the_metric_counts_it(journal_with_a_bad_file: Path, tmp_path: Path) -> None:
    text = scrape_in_process(journal_with_a_bad_file, tmp_path / "s")
    assert "sglang_sentinel_journal_files_unreadable 1.0" in text
