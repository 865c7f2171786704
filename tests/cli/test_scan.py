"""Golden end-to-end: real journal files in, startup records, findings and exit codes out."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import journaltools
import pytest
from journaltools import StartupScript, build_journal, read_fixture_log, seed_fixture_dir

from sglang_sentinel.cli import main

SECRET = "sk-EXAMPLE-not-a-real-key"
SEED_1 = "6a1f0c2e9b7d4e3f8a5b1c0d2e4f6a8b"
SEED_2 = "c37e91d04a5b4f6e9d8c7b6a5f4e3d2c"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def scan_json(
    capsys: pytest.CaptureFixture[str], journal: Path, state: Path, *extra: str
) -> dict[str, Any]:
    code, out, err = run_cli(
        capsys, "scan", "--journal-dir", str(journal), "--state-dir", str(state), "--json", *extra
    )
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def all_bytes_under(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in path.rglob("*") if p.is_file())


def test_seed_fixture_two_ready_startups_with_the_documented_facts(
    capsys: pytest.CaptureFixture[str], seed_journal_dir: Path, tmp_path: Path
) -> None:
    doc = scan_json(capsys, seed_journal_dir, tmp_path / "state")
    first, second = doc["startups"]
    assert [s["invocation_id"] for s in doc["startups"]] == [SEED_1, SEED_2]
    assert first["outcome"] == second["outcome"] == "ready"
    assert first["unit"] == "sglang-qwen.service"
    f1, f2 = first["facts"], second["facts"]
    assert (f1["max_running_requests"], f2["max_running_requests"]) == (48, 26)
    assert (f1["max_total_num_tokens"], f2["max_total_num_tokens"]) == (507050, 277552)
    assert (f1["piecewise_cuda_graph"], f2["piecewise_cuda_graph"]) == (True, False)
    assert (f1["load_avail_mem_gb"], f2["load_avail_mem_gb"]) == (93.72, 87.07)
    assert (f1["mamba_cache_size"], f2["mamba_cache_size"]) == (145, 79)
    assert f1["cuda_graph"] is True and f2["cuda_graph"] is True
    assert f1["tp_size"] == 4 and f1["model_path"] == "/models/Qwen3.5-122B-A10B"
    assert f1["attention_backend"] == "flashinfer"
    assert f1["context_len"] == 262144 and f1["chunked_prefill_size"] == 8192
    # The MoE warnings are present in both startups: present, but not new.
    assert (
        len(f1["moe_config_missing"]) == 2 and f1["moe_config_missing"] == f2["moe_config_missing"]
    )
    assert first["baseline"] is None and first["findings"] == []
    assert second["baseline"] == {"invocation_id": SEED_1, "kind": "previous"}
    checks = {f["check"]: f for f in second["findings"]}
    assert set(checks) == {
        "max_running_requests_drop",
        "kv_cache_tokens_drop",
        "piecewise_cuda_graph_disabled",
    }
    mrr = checks["max_running_requests_drop"]
    assert (mrr["severity"], mrr["baseline"], mrr["current"]) == ("critical", 48, 26)
    evidence = "\n".join(checks["piecewise_cuda_graph_disabled"]["evidence"])
    assert "--enable-flashinfer-allreduce-fusion" in evidence
    assert "--enable-fused-moe-sum-all-reduce" in evidence
    assert "disable_piecewise_cuda_graph" in checks["piecewise_cuda_graph_disabled"]["message"]
    assert "set by SGLang" in checks["piecewise_cuda_graph_disabled"]["message"]
    assert "free GPU memory at load 93.72 → 87.07 GB" in evidence


def test_seed_secret_reaches_no_output_and_no_state(
    capsys: pytest.CaptureFixture[str], seed_journal_dir: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    code, out, err = run_cli(
        capsys, "scan", "--journal-dir", str(seed_journal_dir), "--state-dir", str(state), "--json"
    )
    assert code == 0
    code2, text, err2 = run_cli(
        capsys, "scan", "--journal-dir", str(seed_journal_dir), "--state-dir", str(state)
    )
    assert code2 == 0
    for blob in (out, err, text, err2):
        assert SECRET not in blob
    assert SECRET.encode() not in all_bytes_under(state)
    assert "<redacted>" in out  # the api_key field is there, masked


def test_scan_twice_records_nothing_twice(
    capsys: pytest.CaptureFixture[str], seed_journal_dir: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    first = scan_json(capsys, seed_journal_dir, state)
    second = scan_json(capsys, seed_journal_dir, state)
    assert first == second
    db = sqlite3.connect(state / "sentinel.sqlite3")
    assert db.execute("SELECT count(*) FROM startups").fetchone()[0] == 2
    # Comparisons are made when read, not stored (state schema 3).
    assert (
        db.execute("SELECT count(*) FROM sqlite_master WHERE name='comparisons'").fetchone()[0] == 0
    )


def test_human_report_names_the_regression(
    capsys: pytest.CaptureFixture[str], seed_journal_dir: Path, tmp_path: Path
) -> None:
    code, out, _ = run_cli(
        capsys, "scan", "--journal-dir", str(seed_journal_dir), "--state-dir", str(tmp_path / "s")
    )
    assert code == 0
    assert "sglang-qwen.service  startup c37e91d0" in out
    assert "vs previous ready startup 6a1f0c2e" in out
    assert "CRITICAL  max_running_requests 48 → 26 (−46 %)" in out
    assert "WARNING   KV cache tokens 507050 → 277552 (−45 %)" in out
    assert (
        "+--enable-flashinfer-allreduce-fusion +--enable-fused-moe-sum-all-reduce; free GPU memory at load 93.72 → 87.07 GB"
        in out
    )


def test_pin_check_and_diff(
    capsys: pytest.CaptureFixture[str], seed_journal_dir: Path, tmp_path: Path
) -> None:
    state = str(tmp_path / "s")
    scan_json(capsys, seed_journal_dir, tmp_path / "s")
    code, out, _ = run_cli(capsys, "check", "--state-dir", state)
    assert code == 1
    assert "CRITICAL" in out
    code, out, _ = run_cli(capsys, "baseline", "--pin", "6a1f0c2e", "--state-dir", state)
    assert code == 0 and "pinned startup 6a1f0c2e" in out
    code, out, _ = run_cli(capsys, "check", "--state-dir", state, "--json")
    assert code == 1
    assert json.loads(out)["startups"][0]["baseline"] == {"invocation_id": SEED_1, "kind": "pinned"}
    code, out, _ = run_cli(capsys, "diff", "--state-dir", state)
    assert code == 0
    assert "max_running_requests" in out and "48 → 26" in out
    # Accepting the new state: pin the latest ready startup; the gate opens.
    code, out, _ = run_cli(capsys, "baseline", "--pin", "--state-dir", state)
    assert code == 0 and "c37e91d0" in out
    code, out, _ = run_cli(capsys, "check", "--state-dir", state)
    assert code == 0
    code, out, _ = run_cli(capsys, "baseline", "--unpin", "--state-dir", state)
    assert code == 0 and "unpinned" in out


def test_startups_lists_both(
    capsys: pytest.CaptureFixture[str], seed_journal_dir: Path, tmp_path: Path
) -> None:
    scan_json(capsys, seed_journal_dir, tmp_path / "s")
    code, out, _ = run_cli(capsys, "startups", "--state-dir", str(tmp_path / "s"))
    assert code == 0
    lines = out.strip().splitlines()
    assert len(lines) == 2
    assert "max_running_requests=48" in lines[0] and "max_running_requests=26" in lines[1]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["scan", "--journal-dir", "/nonexistent/journal"], "does not exist"),
        (["baseline", "--pin", "deadbeef00"], "no startup with invocation id"),
        (["baseline", "--pin", "xyz"], "at least 6 hex digits"),
        (["diff", "--unit", "nothing.service"], "no startups recorded"),
        (["scan", "--since", "the day before"], "--since"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str],
    seed_journal_dir: Path,
    tmp_path: Path,
    argv: list[str],
    needle: str,
) -> None:
    state = tmp_path / "s"
    scan_json(capsys, seed_journal_dir, state)
    if argv[0] != "frobnicate":
        argv = [*argv, "--state-dir", str(state)]
    code, _, err = run_cli(capsys, *argv)
    assert code == 2
    assert needle in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_unwritable_state_dir_is_a_clear_error(
    capsys: pytest.CaptureFixture[str], seed_journal_dir: Path, tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code, _, err = run_cli(
        capsys, "scan", "--journal-dir", str(seed_journal_dir), "--state-dir", str(blocker / "s")
    )
    assert code == 2
    assert "state directory" in err and "Traceback" not in err


def test_check_without_state_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_cli(capsys, "check", "--state-dir", str(tmp_path / "empty"))
    assert code == 2
    assert "no state" in err


def test_corrupt_rules_file_from_config_lists_problems(
    capsys: pytest.CaptureFixture[str], seed_journal_dir: Path, tmp_path: Path
) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "bad.yaml").write_text("version: 1\nrules:\n  - id: broken\n    regex: '('\n")
    config = tmp_path / "config.yaml"
    config.write_text(f"rules:\n  dirs: [{rules}]\n")
    code, _, err = run_cli(
        capsys,
        "scan",
        "--config",
        str(config),
        "--journal-dir",
        str(seed_journal_dir),
        "--state-dir",
        str(tmp_path / "s"),
    )
    assert code == 2
    assert "bad.yaml:broken:" in err
    assert "Traceback" not in err


def test_json_stdout_is_only_json_when_run_as_a_program(
    seed_journal_dir: Path, tmp_path: Path
) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sglang_sentinel.cli",
            "scan",
            "--journal-dir",
            str(seed_journal_dir),
            "--state-dir",
            str(tmp_path / "s"),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "SENTINEL_STATE_DIR": ""},
    )
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)["startups"]) == 2


def test_state_dir_from_environment(
    capsys: pytest.CaptureFixture[str],
    seed_journal_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SENTINEL_STATE_DIR", str(tmp_path / "env-state"))
    code, _, err = run_cli(capsys, "scan", "--journal-dir", str(seed_journal_dir), "--json")
    assert code == 0, err
    assert (tmp_path / "env-state" / "sentinel.sqlite3").exists()


def test_seed_replayed_from_fixture_logs_matches_the_export(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """StartupScript replays of the .log files give the same facts as the real export."""
    fixture = seed_fixture_dir()
    scenario = json.loads((fixture / "scenario.json").read_text())
    entries = []
    for s in scenario["startups"]:
        script = StartupScript(
            unit=s["unit"], invocation_id=s["invocation_id"], pid=s["pid"], cmdline=s["cmdline"]
        )
        script.log(read_fixture_log(fixture / s["log"]))
        entries.extend(script.entries())
    export = journaltools.write_export(entries, tmp_path / "replay.export")
    journal = build_journal(export, tmp_path / "j")
    doc = scan_json(capsys, journal, tmp_path / "s")
    assert [s["facts"]["max_running_requests"] for s in doc["startups"]] == [48, 26]
    assert {f["check"] for f in doc["startups"][1]["findings"]} == {
        "max_running_requests_drop",
        "kv_cache_tokens_drop",
        "piecewise_cuda_graph_disabled",
    }
