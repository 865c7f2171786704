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


# Downgrade lines of the startup window (the ledger's), one carrying a secret.
FALLBACK = f"Fallback to the default config because api_key={SECRET} was given"
RADIX = "Disabling Radix Cache for Qwen3ForCausalLM as it is not yet supported."
CUSTOM_AR = "Custom allreduce is disabled because this process group spans across nodes."


def startup(
    day: str, *, model: str, tp: int, mrr: int, downgrades: tuple[str, ...] = (FALLBACK, RADIX)
) -> StartupScript:
    """One ready startup with the downgrade lines and 40 decode lines past the warm-up."""
    s = StartupScript(unit=UNIT, start=f"{day} 10:00:00", boot_at=f"{day} 00:00:00")
    s.started(f"{day} 10:00:00")
    s.line(
        f"[{day} 10:00:01] server_args=ServerArgs(model_path='/models/{model}', "
        f"tp_size={tp}, api_key='{SECRET}', dp_size=1)"
    )
    for line in downgrades:
        s.line(f"[{day} 10:00:02 TP0] {line}")
    s.line(
        f"[{day} 10:00:50 TP0] max_total_num_tokens=400000, chunked_prefill_size=8192, "
        f"max_prefill_tokens=16384, max_running_requests={mrr}, context_len=40960, "
        "available_gpu_mem=20.00 GB"
    )
    s.line(f"[{day} 10:00:55] The server is fired up and ready to roll!")
    for n in range(40):
        s.line(
            f"[{day} 10:{10 + n // 60:02d}:{n % 60:02d} TP0] Decode batch, #running-req: 4, "
            f"#token: 900, token usage: 0.05, cuda graph: True, gen throughput (token/s): "
            f"{400 + n % 7}.50, #queue-req: 0"
        )
    return s


def host(
    tmp_path: Path,
    name: str,
    *,
    model: str,
    tp: int,
    mrr: int,
    gpu: str,
    scripts: tuple[StartupScript, ...] = (),
) -> Path:
    """A host's journal (one ready startup, or `scripts`) scanned into its own state; returns
    its config."""
    d = tmp_path / name
    d.mkdir()
    entries = [
        e
        for s in scripts or (startup("2026-01-01", model=model, tp=tp, mrr=mrr),)
        for e in s.entries()
    ]
    jdir = build_journal(write_export(entries, d / "j.export"), d / "journal")
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
    for part in ("", "observed_"):
        canonical = json.dumps(
            doc[part + "baseline" if not part else "observed"],
            sort_keys=True,
            separators=(",", ":"),
        )
        assert doc[part + "sha256"] == hashlib.sha256(canonical.encode()).hexdigest()
    assert (doc["format"], doc["version"], doc["gpu"]) == (
        "sglang-sentinel-baseline",
        2,
        "H100-80GB",
    )
    assert (doc["baseline"]["model"], doc["baseline"]["tp_size"]) == ("Qwen3-8B", "2")
    assert doc["baseline"]["facts"]["max_running_requests"] == 128
    assert doc["baseline"]["server_args"]["api_key"] == "<redacted>"
    ledger = doc["observed"]["ledger"]
    assert [(t["kind"], t["example"]) for t in ledger["templates"] if t["kind"] == "downgrade"] == [
        ("downgrade", "Fallback to the default config because api_key=<redacted> was given"),
        ("downgrade", RADIX),
    ]
    assert ledger["mask_version"] == 1
    assert doc["observed"]["decode"]["counts"]["decode_lines"] == 40
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


def _check(capsys: pytest.CaptureFixture[str], config: Path) -> tuple[int, dict[str, Any]]:
    code, out, err = run(capsys, "check", "--config", str(config), "--json")
    assert code in (0, 1), err
    latest: dict[str, Any] = json.loads(out)["startups"][-1]
    return code, latest


def _templates(log_diff: dict[str, Any], side: str) -> set[tuple[str, str]]:
    return {(t["kind"], t["template"]) for t in log_diff[side]}


def two_startups(tmp_path: Path) -> Path:
    """A host whose second startup printed a downgrade line the first never did (custom
    all-reduce) and not one the first did (radix cache)."""
    first = startup("2026-01-01", model="Qwen3-8B", tp=2, mrr=128)
    second = startup(
        "2026-01-02", model="Qwen3-8B", tp=2, mrr=128, downgrades=(FALLBACK, CUSTOM_AR)
    )
    return host(
        tmp_path, "a", model="Qwen3-8B", tp=2, mrr=128, gpu="H100-80GB", scripts=(first, second)
    )


def test_an_imported_export_compares_like_the_pinned_startup_it_came_from(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Export -> import: the same log diff (new and gone templates) and the same decode
    comparison as against the pinned startup itself; importing a host's own export keeps its
    downgrade ledger on."""
    config = two_startups(tmp_path)
    capsys.readouterr()
    listed = run(capsys, "startups", "--config", str(config), "--json")[1]
    first = json.loads(listed)["startups"][0]
    pin = run(capsys, "baseline", "--config", str(config), "--pin", first["invocation_id"])
    assert pin[0] == 0, pin[2]
    code, pinned = _check(capsys, config)
    assert pinned["baseline"]["kind"] == "pinned"
    new = {("downgrade", CUSTOM_AR)}
    gone = {("downgrade", RADIX)}
    assert (_templates(pinned["log_diff"], "new"), _templates(pinned["log_diff"], "gone")) == (
        new,
        gone,
    )
    assert pinned["runtime"]["decode"]["baseline_samples"] == 39  # 40 lines, the first one not
    path = tmp_path / "base.json"
    assert run(capsys, "baseline", "--config", str(config), "--export", str(path))[0] == 0
    doc = json.loads(path.read_text())
    code2, out, err = run(capsys, "baseline", "--config", str(config), "--import", str(path))
    assert code2 == 0, err
    assert out == f"{UNIT}: pinned imported baseline sha256 {doc['sha256']}\n"
    code3, imported = _check(capsys, config)
    assert imported["baseline"] == {"invocation_id": doc["sha256"][:32], "kind": "pinned"}
    assert imported["log_diff"] == pinned["log_diff"]
    assert imported["runtime"]["decode"] == pinned["runtime"]["decode"]
    assert [(f["check"], f["severity"], f["message"]) for f in imported["findings"]] == [
        (f["check"], f["severity"], f["message"]) for f in pinned["findings"]
    ]
    assert [f["check"] for f in imported["findings"]] == ["new_downgrade_message"]
    assert code3 == code == 1
