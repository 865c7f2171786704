"""Startup aggregation across SGLang versions and journal shapes, on real journal files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from journaltools import StartupScript, build_journal, write_export

from sglang_sentinel.cli import main

UNIT = "sglang-qwen.service"
CMD = "/opt/sglang/.venv/bin/python3 -m sglang.launch_server --model-path /models/m --tp-size 2"


def server_args_0523(prefill_backend: str = "breakable", api_key: str = "sk-secret-123456") -> str:
    return (
        "[2026-10-30 10:00:01] server_args={'model_path': '/models/Qwen3-30B', "
        "'served_model_name': 'qwen3', 'tp_size': 2, 'dp_size': 1, 'attention_backend': 'fa3', "
        f"'api_key': '{api_key}', 'chunked_prefill_size': 8192, "
        "'cuda_graph_config': {'decode': {'backend': 'full'}, "
        f"'prefill': {{'backend': '{prefill_backend}'}}}}, 'cuda_graph_backend_prefill': None, "
        "'enable_fused_moe_sum_all_reduce': False}"
    )


def startup_0523(
    script: StartupScript, *, mrr: int, kv: int, prefill: bool = True
) -> StartupScript:
    script.started("2026-10-30 10:00:00")
    script.line(server_args_0523("breakable" if prefill else "disabled"))
    for tp in (0, 1):
        script.line(f"[2026-10-30 10:00:05 TP{tp}] Load weight begin. avail mem=78.50 GB")
        script.line(
            f"[2026-10-30 10:00:30 TP{tp}] Load weight end. elapsed=25.10 s, "
            "type=Qwen3MoeForCausalLM, avail mem=48.00 GB, mem usage=30.50 GB."
        )
        script.line(
            f"[2026-10-30 10:00:31 TP{tp}] KV Cache is allocated. dtype: torch.bfloat16, "
            f"#tokens: {kv}, K size: 10.00 GB, V size: 10.00 GB"
        )
        script.line(f"[2026-10-30 10:00:31 TP{tp}] Memory pool end. avail mem=27.00 GB")
        if prefill:
            script.line(
                f"[2026-10-30 10:00:32 TP{tp}] Capture target prefill CUDA graph begin. "
                "backend=breakable, num_tokens=[8, 16], avail mem=26.90 GB"
            )
        else:
            script.line(
                f"[2026-10-30 10:00:32 TP{tp}] Disable prefill CUDA graph because cuda_graph_config "
                "resolved prefill.backend='disabled' (e.g. via --cuda-graph-backend-prefill=disabled "
                "or auto-disable rules)."
            )
        script.line(
            f"[2026-10-30 10:00:40 TP{tp}] Capture target decode CUDA graph begin. backend=full, "
            "num_tokens_per_req=1, avail mem=26.00 GB"
        )
    script.line(
        f"[2026-10-30 10:00:50 TP0] max_total_num_tokens={kv}, chunked_prefill_size=8192, "
        f"max_prefill_tokens=16384, max_running_requests={mrr}, context_len=40960, "
        "available_gpu_mem=20.00 GB"
    )
    script.line("[2026-10-30 10:00:55] The server is fired up and ready to roll!")
    script.line(
        "[2026-10-30 10:01:10 TP0] Decode batch, #running-req: 5, #token: 900, token usage: 0.02, "
        "cuda graph: True, gen throughput (token/s): 321.50, #queue-req: 2"
    )
    return script


def journal_of(tmp_path: Path, *scripts: StartupScript) -> Path:
    entries = []
    for s in scripts:
        entries.extend(s.entries())
    entries.sort(key=lambda e: int(e["__REALTIME_TIMESTAMP"]))
    tmp_path.mkdir(parents=True, exist_ok=True)
    export = write_export(entries, tmp_path / "j.export")
    return build_journal(export, tmp_path / "journal")


def scan(
    capsys: pytest.CaptureFixture[str], journal: Path, tmp_path: Path, *units: str
) -> dict[str, Any]:
    argv = ["scan", "--journal-dir", str(journal), "--state-dir", str(tmp_path / "s"), "--json"]
    for u in units:
        argv += ["--unit", u]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def test_sglang_0523_dict_repr_and_prefill_graph(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a = startup_0523(StartupScript(cmdline=CMD, start="2026-10-30 10:00:00"), mrr=64, kv=400000)
    b = startup_0523(StartupScript(cmdline=CMD), mrr=64, kv=400000, prefill=False)
    doc = scan(capsys, journal_of(tmp_path / "a", a), tmp_path / "a")
    (rec,) = doc["startups"]
    facts = rec["facts"]
    assert rec["outcome"] == "ready"
    assert facts["max_running_requests"] == 64
    assert facts["kv_cache_tokens"] == 400000
    assert facts["piecewise_cuda_graph"] is True
    assert facts["cuda_graph"] is True
    assert facts["tp_size"] == 2 and facts["attention_backend"] == "fa3"
    assert facts["load_avail_mem_gb"] == 78.5
    assert rec["server_args"]["api_key"] == "<redacted>"
    doc_b = scan(capsys, journal_of(tmp_path / "b", b), tmp_path / "b")
    assert doc_b["startups"][0]["facts"]["piecewise_cuda_graph"] is False


def test_crash_loop_records_every_failed_startup_with_its_reason(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    scripts = []
    for i in range(3):
        s = StartupScript(cmdline=CMD, start=f"2026-03-10 10:0{i}:00")
        s.started(f"2026-03-10 10:0{i}:00")
        s.line(f"[2026-03-10 10:0{i}:05 TP0] Load weight begin. avail mem=20.00 GB")
        s.line(
            f"[2026-03-10 10:0{i}:20 TP0] Scheduler hit an exception: Traceback (most recent call last):"
        )
        s.line(
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            "Current value: mem_fraction_static=0.93",
            when=f"2026-03-10 10:0{i}:20",
        )
        s.process_exited(1, when=f"2026-03-10 10:0{i}:21")
        s.failed("exit-code", when=f"2026-03-10 10:0{i}:21")
        scripts.append(s)
    doc = scan(capsys, journal_of(tmp_path, *scripts), tmp_path)
    assert [s["outcome"] for s in doc["startups"]] == ["failed"] * 3
    for s in doc["startups"]:
        assert (
            "Scheduler hit an exception" in s["failure_reason"]
            or "Not enough memory" in s["failure_reason"]
        )
        assert [f["check"] for f in s["findings"]] == ["startup_failed"]
    code = main(["check", "--state-dir", str(tmp_path / "s")])
    capsys.readouterr()
    assert code == 1


def test_unit_exit_without_sglang_error_is_a_failed_startup(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    s = StartupScript(cmdline=CMD + " --enable-fused-moe-sum-all-reduce")
    s.started("2026-03-09 21:31:07")
    s.line("usage: launch_server.py [-h] --model-path MODEL_PATH", when="2026-03-09 21:31:08")
    s.process_exited(2, when="2026-03-09 21:31:08")
    s.failed("exit-code", when="2026-03-09 21:31:08")
    doc = scan(capsys, journal_of(tmp_path, s), tmp_path)
    (rec,) = doc["startups"]
    assert rec["outcome"] == "failed"
    assert "exit-code" in rec["failure_reason"] and "status=2" in rec["failure_reason"]


def test_normal_stop_after_ready_is_not_a_failure(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    s = startup_0523(StartupScript(cmdline=CMD), mrr=10, kv=1000)
    s.line(
        "[2026-10-30 11:00:00] SIGTERM received. signum=None frame=None. Draining requests and "
        "shutting down..."
    )
    s.process_exited(1, when="2026-10-30 11:00:01")  # killed by itself; status is irrelevant
    s.failed("signal", when="2026-10-30 11:00:01")
    doc = scan(capsys, journal_of(tmp_path, s), tmp_path)
    assert doc["startups"][0]["outcome"] == "ready"
    assert doc["startups"][0]["findings"] == []


def test_dp_prefixes_take_the_dp0_tp0_summary(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    s = StartupScript(cmdline=CMD)
    s.started("2026-03-09 21:31:07")
    for dp, mrr in ((1, 30), (0, 32)):
        s.line(
            f"[2026-03-09 21:32:00 DP{dp} TP0] max_total_num_tokens=100000, chunked_prefill_size=8192, "
            f"max_prefill_tokens=16384, max_running_requests={mrr}, context_len=32768, "
            "available_gpu_mem=10.00 GB"
        )
    s.line("[2026-03-09 21:32:10] The server is fired up and ready to roll!")
    doc = scan(capsys, journal_of(tmp_path, s), tmp_path)
    assert doc["startups"][0]["facts"]["max_running_requests"] == 32


@pytest.mark.parametrize("line_before", [False, True])
def test_server_args_split_at_48k_is_reassembled(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, line_before: bool
) -> None:
    """Whether the split line is the invocation's first entry or comes (as raw bytes, the fast
    path) after another line of it."""
    long_list = ", ".join(str(i) for i in range(12000))
    line = (
        "[2026-03-09 21:31:11] server_args=ServerArgs(model_path='/models/big', tp_size=8, "
        f"api_key='sk-verysecret-000', cuda_graph_bs=[{long_list}], disable_cuda_graph=False, "
        "enable_piecewise_cuda_graph=True, dp_size=1)"
    )
    assert len(line) > 49152
    s = StartupScript(cmdline=CMD)
    s.started("2026-03-09 21:31:07")
    if line_before:
        s.line("[2026-03-09 21:31:09] Launching the server", when="2026-03-09 21:31:09")
    s.line(line[:49152], when="2026-03-09 21:31:11")
    s.line(line[49152:], when="2026-03-09 21:31:11")
    s.line("[2026-03-09 21:32:10] The server is fired up and ready to roll!")
    doc = scan(capsys, journal_of(tmp_path, s), tmp_path)
    rec = doc["startups"][0]
    assert rec["server_args"]["tp_size"] == 8
    assert rec["server_args"]["dp_size"] == 1
    assert len(rec["server_args"]["cuda_graph_bs"]) == 12000
    assert rec["facts"]["tp_size"] == 8
    assert "sk-verysecret-000" not in json.dumps(doc)


def test_several_units_on_one_host(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    a = startup_0523(StartupScript(unit="sglang-a.service", cmdline=CMD), mrr=11, kv=1000)
    b = startup_0523(StartupScript(unit="sglang-b.service", cmdline=CMD), mrr=22, kv=2000)
    other = startup_0523(StartupScript(unit="unwatched.service", cmdline=CMD), mrr=33, kv=3000)
    doc = scan(
        capsys, journal_of(tmp_path, a, b, other), tmp_path, "sglang-a.service", "sglang-b.service"
    )
    got = {s["unit"]: s["facts"]["max_running_requests"] for s in doc["startups"]}
    assert got == {"sglang-a.service": 11, "sglang-b.service": 22}


def test_journal_without_invocation_ids_splits_on_started_lines(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    first = startup_0523(StartupScript(cmdline=CMD, start="2026-10-30 10:00:00"), mrr=64, kv=400000)
    entries = first.entries()
    second = []
    # The same startup a day later, regressed.
    later = startup_0523(StartupScript(cmdline=CMD, start="2026-10-30 10:00:00"), mrr=32, kv=200000)
    for e in later.entries():
        e = dict(e)
        e["__REALTIME_TIMESTAMP"] = str(int(e["__REALTIME_TIMESTAMP"]) + 86_400_000_000)
        second.append(e)
    for e in entries + second:
        e.pop("_SYSTEMD_INVOCATION_ID", None)
        e.pop("INVOCATION_ID", None)
    export = write_export(entries + second, tmp_path / "noinv.export")
    doc = scan(capsys, build_journal(export, tmp_path / "j"), tmp_path)
    assert [s["facts"]["max_running_requests"] for s in doc["startups"]] == [64, 32]
    assert "max_running_requests_drop" in {f["check"] for f in doc["startups"][1]["findings"]}


def test_reworded_summary_line_is_reported_as_fact_missing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    good = startup_0523(StartupScript(cmdline=CMD, start="2026-10-30 10:00:00"), mrr=64, kv=400000)
    changed = StartupScript(cmdline=CMD, start="2026-10-31 10:00:00")
    changed.started("2026-10-31 10:00:00")
    changed.line("[2026-10-31 10:00:50 TP0] Scheduler capacity: total_tokens=400000 running=64")
    changed.line("[2026-10-31 10:00:55] The server is fired up and ready to roll!")
    doc = scan(capsys, journal_of(tmp_path, good, changed), tmp_path)
    findings = {f["check"]: f for f in doc["startups"][1]["findings"]}
    assert "fact_missing" in findings
    assert "max_running_requests" in findings["fact_missing"]["message"]
    # Never a silent "no regression" on a fact that could not be seen:
    assert "max_running_requests_drop" not in findings


@pytest.mark.parametrize(
    ("extra_flag", "explained"),
    [
        ("", "cuda_graph_config.prefill.backend='disabled' not on the command line: set by SGLang"),
        (
            " --cuda-graph-backend-prefill=disabled",
            "cuda_graph_config.prefill.backend='disabled': "
            "--cuda-graph-backend-prefill is on the command line",
        ),
    ],
)
def test_sglang_0523_prefill_graph_off_names_who_turned_it_off(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, extra_flag: str, explained: str
) -> None:
    """0.5.23 keeps the switch in a nested cuda_graph_config: the finding still says who set it."""
    a = startup_0523(StartupScript(cmdline=CMD, start="2026-10-30 10:00:00"), mrr=64, kv=400000)
    b = StartupScript(cmdline=CMD + extra_flag, start="2026-10-30 11:00:00")
    b = startup_0523(b, mrr=64, kv=400000, prefill=False)
    doc = scan(capsys, journal_of(tmp_path, a, b), tmp_path)
    (finding,) = [
        f for f in doc["startups"][1]["findings"] if f["check"] == "piecewise_cuda_graph_disabled"
    ]
    assert explained in finding["message"], finding
