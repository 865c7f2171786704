"""A journal file truncated under the reader: SIGBUS is survived, reported and counted."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from journaltools import build_journal, ready_startup, write_export

HERE = Path(__file__).resolve().parent


def big_journal(tmp_path: Path) -> Path:
    entries = []
    for i in range(300):
        entries += ready_startup(f"2026-03-{1 + i % 28:02d} 10:00:00", 48).entries()
    return build_journal(write_export(entries, tmp_path / "x.export"), tmp_path / "j")


def test_a_journal_file_truncated_mid_read_is_reported_not_a_sigbus(tmp_path: Path) -> None:
    """Without the handler this process dies of SIGBUS (rc -7), as `scan` and `run` did."""
    journal = big_journal(tmp_path)
    [file] = list(journal.glob("*.journal"))
    assert file.stat().st_size > 1 << 20
    script = textwrap.dedent(
        f"""
        import os, json
        import structlog
        from sglang_sentinel.config.load import Config, JournalConfig
        from sglang_sentinel.sources import JournalSource
        from sglang_sentinel.pipeline import Pipeline, load_rules_and_policy
        from sglang_sentinel.state import StateStore
        from pathlib import Path
        unit = "sglang-qwen.service"
        config = Config(units=(unit,), journal=JournalConfig(directory=Path({str(journal)!r})))
        rules, policy = load_rules_and_policy(config)
        source = JournalSource([unit], directory=Path({str(journal)!r}))
        source.open()
        source.seek_head()
        with structlog.testing.capture_logs() as logs:
            p = Pipeline(source, rules, policy, StateStore(Path({str(tmp_path / "s")!r})),
                         source_key="t")
            p.process(limit=10)
            os.truncate({str(file)!r}, 8192)
            p.process()
            p.commit(final=True)
        print(json.dumps({{"truncated": p.stats.journal_truncated_reads,
                          "events": [e["event"] for e in logs if e["log_level"] == "error"]}}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    import json

    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["truncated"] >= 1
    assert out["events"].count("journal_file_truncated") == 1
