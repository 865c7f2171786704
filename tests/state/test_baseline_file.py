"""`sentinel baseline --export/--import`: one known-good baseline for a fleet."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from journaltools import StartupScript, build_journal, write_export

from sglang_sentinel.cli import main

UNIT = "sgl-test-base.service"
SECRET = "sk-fleet-secret-9876543210"


def host(tmp_path: Path, name: str, *, model: str, tp: int, mrr: int, gpu: str) -> Path:
    """A host's journal (one ready startup) scanned into its own state; returns its config."""
    d = tmp_path / name
    d.mkdir()
    s = StartupScript(unit=UNIT, start="2026-01-01 10:00:00", boot_at="2026-01-01 00:00:00")
    s.started("2026-01-01 10:00:00")
    s.line(
        f"[2026-01-01 10:00:01] server_args=ServerArgs(model_path='/models/{model}', "
        f"tp_size={tp}, api_key='{SECRET}', dp_size=1)"
    )
    s.line(
        "[2026-01-01 10:00:50 TP0] max_total_num_tokens=400000, chunked_prefill_size=8192, "
        f"max_prefill_tokens=16384, max_running_requests={mrr}, context_len=40960, "
        "available_gpu_mem=20.00 GB"
    )
    s.line("[2026-01-01 10:00:55] The server is fired up and ready to roll!")
    jdir = build_journal(write_export(s.entries(), d / "j.export"), d / "journal")
    config = d / "config.yaml"
    config.write_text(
        f"units: [{UNIT}]\nstate_dir: {d / 'state'}\ngpu: {gpu}\njournal: {{directory: {jdir}}}\n"
    )
    assert main(["scan", "--config", str(config)]) == 0
    return config


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def export(capsys: pytest.CaptureFixture[str], config: Path, path: Path) -> dict[str, Any]:
    assert run(capsys, "baseline", "--config", str(config), "--pin")[0] == 0
    code, out, err = run(capsys, "baseline", "--config", str(config), "--export", str(path))
    assert code == 0, err
    doc: dict[str, Any] = json.loads(path.read_text())
    assert f"sha256 {doc['sha256']}" in out
    return doc


def test_export_is_content_hashed_and_carries_no_secret(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a = host(tmp_path, "a", model="Qwen3-8B", tp=2, mrr=128, gpu="H100-80GB")
    doc = export(capsys, a, tmp_path / "base.json")
    canonical = json.dumps(doc["baseline"], sort_keys=True, separators=(",", ":"))
    assert doc["sha256"] == hashlib.sha256(canonical.encode()).hexdigest()
    assert (doc["format"], doc["version"], doc["gpu"]) == (
        "sglang-sentinel-baseline",
        1,
        "H100-80GB",
    )
    assert (doc["baseline"]["model"], doc["baseline"]["tp_size"]) == ("Qwen3-8B", "2")
    assert doc["baseline"]["facts"]["max_running_requests"] == 128
    assert doc["baseline"]["server_args"]["api_key"] == "<redacted>"
    assert SECRET not in (tmp_path / "base.json").read_text()


def test_import_pins_it_and_the_same_hash_comes_back_out(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a = host(tmp_path, "a", model="Qwen3-8B", tp=2, mrr=128, gpu="H100-80GB")
    b = host(tmp_path, "b", model="Qwen3-8B", tp=2, mrr=100, gpu="H100-80GB")
    doc = export(capsys, a, tmp_path / "base.json")
    code, out, err = run(
        capsys, "baseline", "--config", str(b), "--import", str(tmp_path / "base.json")
    )
    assert code == 0, err
    assert out.strip() == f"{UNIT}: pinned imported baseline sha256 {doc['sha256']}"
    # Host b's startup is now judged against host a's baseline.
    code, out, _ = run(capsys, "check", "--config", str(b), "--json")
    [startup] = json.loads(out)["startups"]
    assert startup["baseline"] == {"invocation_id": doc["sha256"][:32], "kind": "pinned"}
    assert [(f["check"], f["baseline"], f["current"]) for f in startup["findings"]] == [
        ("max_running_requests_drop", 128, 100)
    ]
    assert code == 1
    # Re-exported from b, the baseline hashes the same: the fleet sees one baseline.
    code, _, err = run(
        capsys, "baseline", "--config", str(b), "--export", str(tmp_path / "again.json")
    )
    assert code == 0, err
    assert json.loads((tmp_path / "again.json").read_text())["sha256"] == doc["sha256"]


@pytest.mark.parametrize(
    ("model", "tp", "gpu", "problem"),
    [
        (
            "Qwen3-32B",
            2,
            "H100-80GB",
            "model differs: file 'Qwen3-8B', sgl-test-base.service runs 'Qwen3-32B'",
        ),
        ("Qwen3-8B", 4, "H100-80GB", "TP size differs: file '2', sgl-test-base.service runs '4'"),
        (
            "Qwen3-8B",
            2,
            "A100-40GB",
            "GPU differs: file 'H100-80GB', this host is 'A100-40GB' (config `gpu:`)",
        ),
    ],
)
def test_import_is_refused_when_model_tp_or_gpu_differ_unless_forced(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, model: str, tp: int, gpu: str, problem: str
) -> None:
    a = host(tmp_path, "a", model="Qwen3-8B", tp=2, mrr=128, gpu="H100-80GB")
    b = host(tmp_path, "b", model=model, tp=tp, mrr=128, gpu=gpu)
    path = tmp_path / "base.json"
    export(capsys, a, path)
    code, out, err = run(capsys, "baseline", "--config", str(b), "--import", str(path))
    assert code == 2 and out == ""
    assert err == (
        f"error: {path}: refusing to import for {UNIT}:\n  {problem}\n(use --force to import anyway)\n"
    )
    code, _, err = run(capsys, "baseline", "--config", str(b), "--json")
    assert json.loads(_)[UNIT] is None  # nothing was pinned
    code, out, err = run(capsys, "baseline", "--config", str(b), "--import", str(path), "--force")
    assert code == 0, err
    assert f"despite: {problem}" in out


def test_a_damaged_or_foreign_file_is_refused_with_the_reason(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a = host(tmp_path, "a", model="Qwen3-8B", tp=2, mrr=128, gpu="H100-80GB")
    path = tmp_path / "base.json"
    doc = export(capsys, a, path)
    doc["baseline"]["facts"]["max_running_requests"] = 256
    path.write_text(json.dumps(doc))
    code, _, err = run(capsys, "baseline", "--config", str(a), "--import", str(path))
    assert code == 2
    assert err == (
        f"error: {path}: content does not match its sha256 (edited or damaged after export); "
        "export it again\n"
    )
    path.write_text('{"startups": []}')
    code, _, err = run(capsys, "baseline", "--config", str(a), "--import", str(path), "--force")
    assert code == 2
    assert "not a baseline file" in err
    code, _, err = run(
        capsys, "baseline", "--config", str(a), "--export", str(tmp_path / "x" / "y.json")
    )
    assert code == 2 and "cannot write" in err


def test_export_without_a_pinned_baseline_says_what_to_do(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a = host(tmp_path, "a", model="Qwen3-8B", tp=2, mrr=128, gpu="H100-80GB")
    code, _, err = run(capsys, "baseline", "--config", str(a), "--export", str(tmp_path / "f.json"))
    assert code == 2
    assert err == f"error: {UNIT}: no baseline pinned to export; pin one with --pin first\n"
