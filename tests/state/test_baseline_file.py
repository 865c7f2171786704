"""`sentinel baseline --export/--import`: one known-good baseline for a fleet."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from journaltools import StartupScript, build_journal, write_export

from sglang_sentinel.cli import main
from sglang_sentinel.startups import OTHER_KEPT, TEMPLATES_KEPT, decode_samples, ledger
from sglang_sentinel.state import baseline_file

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


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """One host with its startup pinned and exported (read-only for the tests using it)."""
    tmp = tmp_path_factory.mktemp("exported")
    config = host(tmp, "a", model="Qwen3-8B", tp=2, mrr=128, gpu="H100-80GB")
    path = tmp / "base.json"
    for argv in (["--pin"], ["--export", str(path)]):
        assert main(["baseline", "--config", str(config), *argv]) == 0
    doc: dict[str, Any] = json.loads(path.read_text())
    return config, doc


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


def _version_1(doc: dict[str, Any]) -> dict[str, Any]:
    """The file an older sentinel exported of the same startup: no observed part."""
    old = {k: v for k, v in doc.items() if k not in ("observed", "observed_sha256")}
    old["version"] = 1
    return old


def test_a_version_1_file_imports_and_its_startups_say_the_lines_were_not_compared(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """No false alarm and no silent null: an info finding with the reason, the import says it,
    the gate is not moved; a later version-1 import never drops the templates a version-2
    import brought."""
    config = two_startups(tmp_path)
    capsys.readouterr()
    first = json.loads(run(capsys, "startups", "--config", str(config), "--json")[1])
    assert (
        run(
            capsys,
            "baseline",
            "--config",
            str(config),
            "--pin",
            first["startups"][0]["invocation_id"],
        )[0]
        == 0
    )
    new_path, old_path = tmp_path / "new.json", tmp_path / "old.json"
    assert run(capsys, "baseline", "--config", str(config), "--export", str(new_path))[0] == 0
    doc = json.loads(new_path.read_text())
    old_path.write_text(json.dumps(_version_1(doc)))
    code, out, err = run(capsys, "baseline", "--config", str(config), "--import", str(old_path))
    assert code == 0, err
    assert out == (
        f"{UNIT}: pinned imported baseline sha256 {doc['sha256']} (the file has no log "
        "templates, exported by an older sentinel: downgrade messages are not compared with "
        "it; export it again and import it)\n"
    )
    code, latest = _check(capsys, config)
    assert latest["log_diff"] is None
    assert [(f["check"], f["severity"], f["message"]) for f in latest["findings"]] == [
        (
            "new_downgrade_message",
            "info",
            "downgrade messages not compared with the baseline: the baseline file has no log "
            "templates (exported by an older sentinel; export it again and import it)",
        )
    ]
    assert code == 0
    # The version-2 file brings the templates; the version-1 file imported again keeps them.
    assert run(capsys, "baseline", "--config", str(config), "--import", str(new_path))[0] == 0
    code, out, err = run(capsys, "baseline", "--config", str(config), "--import", str(old_path))
    assert code == 0, err
    assert out == (
        f"{UNIT}: pinned imported baseline sha256 {doc['sha256']} (kept the copy already "
        "imported: it has the log templates this file lacks)\n"
    )
    code, latest = _check(capsys, config)
    assert _templates(latest["log_diff"], "new") == {("downgrade", CUSTOM_AR)}
    assert code == 1


def _bad(doc: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    bad: dict[str, Any] = json.loads(json.dumps(doc))
    node: Any = bad
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return bad


@pytest.mark.parametrize(
    ("path", "value", "problem"),
    [
        (
            ("version",),
            3,
            "baseline file version 3 is not supported (this sentinel reads versions 1, 2)",
        ),
        (("observed",), [], 'malformed baseline: "observed" must be an object'),
        (
            ("observed", "ledger", "mask_version"),
            7,
            'malformed baseline: "observed.ledger.mask_version" 7 is unknown (this sentinel '
            "knows mask versions 1 to 1; a newer sentinel exported it: upgrade this one)",
        ),
        (
            ("observed", "ledger", "templates"),
            "Fallback",
            'malformed baseline: "observed.ledger.templates" must be a list',
        ),
        (
            ("observed", "ledger", "templates"),
            [{"template": f"t{i}"} for i in range(193)],
            'malformed baseline: "observed.ledger.templates" has 193 templates, more than the '
            "192 a ledger keeps",
        ),
        (
            ("observed", "ledger", "templates", 0, "kind"),
            "fatal",
            'malformed baseline: "observed.ledger.templates[0]" "kind" must be "downgrade" or '
            "\"other\", not 'fatal'",
        ),
        (
            ("observed", "ledger", "templates", 0, "example"),
            "x" * 401,
            'malformed baseline: "observed.ledger.templates[0]" "example" must be a string of '
            "0 to 400 characters",
        ),
        (
            ("observed", "ledger", "templates", 0, "ranks"),
            "TP0",
            'malformed baseline: "observed.ledger.templates[0]" "ranks" must be a list of at '
            "most 256 names of 1 to 64 characters",
        ),
        (
            ("observed", "ledger", "dropped"),
            -1,
            'malformed baseline: "observed.ledger.dropped" must be a count (an integer of at '
            "least 0)",
        ),
        (
            ("observed", "decode", "buckets", "bs4/ctx7"),
            [[1.0, 0.0, 400.5, 4.0]],
            'malformed baseline: "observed.decode.buckets" must hold at most 64 samples a '
            "bucket, each a list of 5 numbers",
        ),
        (
            ("observed", "decode", "counts", "clean"),
            True,
            'malformed baseline: "observed.decode.counts" must be an object of at most 64 numbers',
        ),
    ],
)
def test_a_malformed_observed_part_is_refused_with_what_is_wrong(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    exported: tuple[Path, dict[str, Any]],
    path: tuple[str | int, ...],
    value: Any,
    problem: str,
) -> None:
    config, doc = exported
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_bad(doc, path, value)))
    code, out, err = run(
        capsys, "baseline", "--config", str(config), "--import", str(bad), "--force"
    )
    assert (code, out, err) == (2, "", f"error: {bad}: {problem}\n")


def test_the_file_bounds_are_the_ledger_and_decode_bounds() -> None:
    """What an import takes is what a startup keeps: an export always imports."""
    assert baseline_file.LEDGER_TEMPLATES == TEMPLATES_KEPT + OTHER_KEPT
    assert baseline_file.EXAMPLE_CHARS == ledger.EXAMPLE_CHARS
    assert baseline_file.TEMPLATE_RANKS == ledger.RANKS_KEPT
    assert baseline_file.DECODE_BUCKETS == decode_samples.MAX_BUCKETS
    assert baseline_file.BUCKET_SAMPLES == decode_samples.MAX_SAMPLES_PER_BUCKET


def test_a_file_at_every_bound_imports_and_fits_the_size_limit(
    tmp_path: Path, exported: tuple[Path, dict[str, Any]]
) -> None:
    """192 templates of the longest, each with 256 ranks and the most rules and facts, and
    a full decode summary: the file `--export` writes of it is read (under FILE_BYTES)."""
    _, doc = exported
    name = "x" * baseline_file.NAME_CHARS
    templates = [
        {
            "template": f"{i:03d}" + "t" * (baseline_file.TEMPLATE_CHARS - 3),
            "example": "e" * baseline_file.EXAMPLE_CHARS,
            "ranks": [f"{r:03d}".ljust(baseline_file.RANK_CHARS, "r") for r in range(256)],
            "rules": [name] * baseline_file.NAMES,
            "facts": [name] * baseline_file.NAMES,
            "kind": "downgrade" if i < TEMPLATES_KEPT else "other",
        }
        for i in range(baseline_file.LEDGER_TEMPLATES)
    ]
    sample = [0.123456789012345, 1.23456789012345, 12345.6789012345, 256.0, 1234567.89012345]
    seen = {
        "ledger": {
            "mask_version": 1,
            "templates": templates,
            "dropped": 10**9,
            "other": {"lines": 1000, "chars": 400_000, "dropped": 10**9},
        },
        "decode": {
            "captured": list(range(1, baseline_file.CAPTURED + 1)),
            "buckets": {f"bs{b}/ctx{b}": [sample] * 64 for b in range(32)},
            "counts": {f"{name[:60]}{k:04d}": 10**12 for k in range(baseline_file.DECODE_KEYS)},
            "phases": {f"{name[:60]}{k:04d}": 1.7e9 for k in range(baseline_file.DECODE_KEYS)},
        },
    }
    full = {**doc, "observed": seen, "observed_sha256": baseline_file.content_sha256(seen)}
    path = tmp_path / "full.json"
    path.write_text(json.dumps(full, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    size = path.stat().st_size
    assert 6_000_000 < size < baseline_file.FILE_BYTES == 8 << 20
    record = baseline_file.read_document(path).record
    assert record.ledger is not None and len(record.ledger["templates"]) == 192
    assert len(record.decode["buckets"]) == 32
