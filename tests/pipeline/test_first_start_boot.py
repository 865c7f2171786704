"""First start without a cursor = the beginning of the CURRENT boot, on a persistent journal whose
archived files hold earlier boots (the README's promise; `seek_monotonic(0)` broke it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from journaltools import StartupScript, build_journal, write_export

from sglang_sentinel.config import Config
from sglang_sentinel.config.schema import JournalConfig
from sglang_sentinel.errors import JournalError
from sglang_sentinel.model import JournalEntry
from sglang_sentinel.pipeline import Pipeline, load_rules_and_policy
from sglang_sentinel.sources import JournalSource
from sglang_sentinel.sources.journal import current_boot_id
from sglang_sentinel.state import StateStore

UNIT = "sglang-qwen.service"
EARLIER_BOOT = "0badb00d0badb00d0badb00d0badb00d"
CURRENT_BOOT = "c0ffee00c0ffee00c0ffee00c0ffee00"


def startup(boot_id: str, day: str, max_running_requests: int) -> StartupScript:
    """A ready startup of UNIT in boot `boot_id`, booted at 08:00 that day."""
    s = StartupScript(start=f"{day} 10:00:00", boot_at=f"{day} 08:00:00", boot_id=boot_id)
    s.started(f"{day} 10:00:00")
    s.line(
        f"[{day} 10:00:50 TP0] max_total_num_tokens=1000, chunked_prefill_size=8192, "
        f"max_prefill_tokens=16384, max_running_requests={max_running_requests}, "
        "context_len=4096, available_gpu_mem=10.00 GB"
    )
    s.line(f"[{day} 10:00:55] The server is fired up and ready to roll!")
    return s


def multi_boot_journal(tmp_path: Path, current: str) -> Path:
    """Like /var/log/journal/MACHINE/: two archived files of two earlier boots, the active file
    of the current boot (each built by systemd-journal-remote from export format)."""
    journal = tmp_path / "journal"
    boots = [
        ("system@0001-0001", startup(EARLIER_BOOT, "2026-03-01", 64)),
        ("system@0001-0002", startup("1" * 32, "2026-03-02", 48)),
        ("system", startup(current, "2026-03-03", 26)),
    ]
    for name, script in boots:
        build_journal(write_export(script.entries(), tmp_path / f"{name}.export"), journal, name)
    return journal


def first_start(journal: Path, state: Path, boot_id: str | None) -> list[int]:
    """A cursor-less start with `from_boot_start`: max_running_requests of what gets recorded."""
    config = Config(units=(UNIT,), journal=JournalConfig(directory=journal))
    rules, policy = load_rules_and_policy(config)
    source = JournalSource([UNIT], directory=journal)
    source.open()
    pipeline = Pipeline(source, rules, policy, StateStore(state), source_key="test")
    pipeline.resume(from_boot_start=True, boot_id=boot_id)
    while pipeline.process(limit=1000):
        pipeline.commit()
    pipeline.commit()
    records = pipeline.store.startups([UNIT])
    source.close()
    return [int(str(r.facts["max_running_requests"])) for r in records]


def test_first_start_records_only_the_current_boot(tmp_path: Path) -> None:
    """Three boots in three files; "now" is the last one: only its startup is recorded."""
    journal = multi_boot_journal(tmp_path, CURRENT_BOOT)
    assert first_start(journal, tmp_path / "s", CURRENT_BOOT) == [26]


def test_first_start_of_an_earlier_boot_reads_that_boot_only(tmp_path: Path) -> None:
    """The boot is a match, not a position: naming the first boot reads it and nothing after."""
    journal = multi_boot_journal(tmp_path, CURRENT_BOOT)
    assert first_start(journal, tmp_path / "s", EARLIER_BOOT) == [64]


def test_the_default_boot_is_the_running_kernels(tmp_path: Path) -> None:
    """No boot id given: /proc/sys/kernel/random/boot_id's, and the first entry read is of it."""
    now = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert current_boot_id() == now.replace("-", "")
    journal = multi_boot_journal(tmp_path, current_boot_id())
    source = JournalSource([UNIT], directory=journal)
    source.open()
    source.seek_boot_start()
    boots = set()
    messages = []
    for _, item in zip(range(3), source.lines(), strict=False):
        mono = source.monotonic()  # of the entry the source is suspended on
        assert mono is not None
        boots.add(mono[1])
        messages.append(item.message if isinstance(item, JournalEntry) else item.decode())
    source.close()
    assert messages[0].startswith("Started sglang-qwen.service")
    assert boots == {current_boot_id()}
    assert first_start(journal, tmp_path / "s", None) == [26]


def test_boot_id_file_is_read_without_dashes_and_a_missing_one_is_named(tmp_path: Path) -> None:
    path = tmp_path / "boot_id"
    path.write_text("5d1b2a0c-9e8f-4f7a-8b6c-5d4e3f2a1b0c\n")
    assert current_boot_id(path) == "5d1b2a0c9e8f4f7a8b6c5d4e3f2a1b0c"
    with pytest.raises(JournalError, match=f"cannot read the boot id from {tmp_path}/missing"):
        current_boot_id(tmp_path / "missing")


def test_a_kernel_boot_the_journal_never_saw_falls_back_to_the_newest_entrys_boot(
    tmp_path: Path,
) -> None:
    """In a container the service's fresh /proc shows the host kernel's boot id, not the one the
    container's journald stamps: "this boot" is then the newest entry's (found under nspawn)."""
    journal = multi_boot_journal(tmp_path, CURRENT_BOOT)
    assert current_boot_id() != CURRENT_BOOT  # the running kernel's boot is not in this journal
    assert first_start(journal, tmp_path / "s", None) == [26]
    source = JournalSource([UNIT], directory=journal)
    source.open()
    assert source.journal_boot("f" * 32) == CURRENT_BOOT
    assert source.journal_boot(EARLIER_BOOT) == EARLIER_BOOT
    source.close()
    empty = tmp_path / "empty"
    empty.mkdir()
    source = JournalSource([UNIT], directory=empty)
    source.open()
    assert source.journal_boot("f" * 32) == "f" * 32
    source.close()
