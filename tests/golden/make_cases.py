"""Writes the journal exports of the synthetic golden cases (deterministic: fixed ids and times),
and the baseline file a case pins before its scan (`baseline.json`, as `sentinel baseline
--export` writes it, from a startup of another host's journal).

Run from the repository root after changing a case: `.venv/bin/python tests/golden/make_cases.py`,
then `.venv/bin/pytest tests/golden/test_golden.py --update-golden` and review the diff.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "support"))
sys.path.insert(0, str(HERE.parent.parent))

from journaltools import StartupScript, build_journal, write_export  # noqa: E402

from sglang_sentinel.cli import main as sentinel  # noqa: E402

CMD = "/opt/sglang/.venv/bin/python3 -m sglang.launch_server --model-path /models/Qwen3-30B --tp-size 2"


def _script(
    n: int, start: str, cmdline: str = CMD, unit: str = "sglang-qwen.service"
) -> StartupScript:
    return StartupScript(
        unit=unit,
        cmdline=cmdline,
        start=start,
        invocation_id=f"{n:02d}" * 16,
        stream_id=f"{n + 50:02d}" * 16,
        pid=41000 + n,
    )


def _v0523(
    script: StartupScript, day: str, *, mrr: int, kv: int, prefill: str, flag: str | None = None
) -> StartupScript:
    """A 0.5.23 startup; `flag` is the raw `cuda_graph_backend_prefill` (None unless given)."""
    script.started(f"{day} 10:00:00")
    script.line(
        f"[{day} 10:00:01] server_args={{'model_path': '/models/Qwen3-30B', "
        "'served_model_name': 'qwen3', 'tp_size': 2, 'dp_size': 1, 'attention_backend': 'fa3', "
        "'api_key': 'sk-golden-not-a-real-key', 'chunked_prefill_size': 8192, "
        "'cuda_graph_config': {'decode': {'backend': 'full'}, "
        f"'prefill': {{'backend': '{prefill}'}}}}, 'cuda_graph_backend_prefill': {flag!r}}}"
    )
    for tp in (0, 1):
        script.line(f"[{day} 10:00:05 TP{tp}] Load weight begin. avail mem=78.50 GB")
        script.line(
            f"[{day} 10:00:30 TP{tp}] Load weight end. elapsed=25.10 s, "
            "type=Qwen3MoeForCausalLM, avail mem=48.00 GB, mem usage=30.50 GB."
        )
        script.line(
            f"[{day} 10:00:31 TP{tp}] KV Cache is allocated. dtype: torch.bfloat16, "
            f"#tokens: {kv}, K size: 10.00 GB, V size: 10.00 GB"
        )
        if prefill == "disabled":
            script.line(
                f"[{day} 10:00:32 TP{tp}] Disable prefill CUDA graph because cuda_graph_config "
                "resolved prefill.backend='disabled' (e.g. via --cuda-graph-backend-prefill=disabled "
                "or auto-disable rules)."
            )
        else:
            script.line(
                f"[{day} 10:00:32 TP{tp}] Capture target prefill CUDA graph begin. "
                f"backend={prefill}, num_tokens=[8, 16], avail mem=26.90 GB"
            )
        script.line(
            f"[{day} 10:00:40 TP{tp}] Capture target decode CUDA graph begin. backend=full, "
            "num_tokens_per_req=1, avail mem=26.00 GB"
        )
    script.line(
        f"[{day} 10:00:50 TP0] max_total_num_tokens={kv}, chunked_prefill_size=8192, "
        f"max_prefill_tokens=16384, max_running_requests={mrr}, context_len=40960, "
        "available_gpu_mem=20.00 GB"
    )
    script.line(f"[{day} 10:00:55] The server is fired up and ready to roll!")
    return script


def sglang_0523_prefill_off() -> list[StartupScript]:
    """0.5.23 dict-repr server_args; the second start loses the prefill graph and capacity."""
    a = _v0523(
        _script(1, "2026-10-30 10:00:00"), "2026-10-30", mrr=64, kv=400000, prefill="breakable"
    )
    b = _v0523(
        _script(2, "2026-10-31 10:00:00"), "2026-10-31", mrr=40, kv=250000, prefill="disabled"
    )
    return [a, b]


def sglang_0523_prefill_flag() -> list[StartupScript]:
    """As prefill-off, but the second start asked for it: `--cuda-graph-backend-prefill disabled`.

    The finding and the evidence for the resolved `cuda_graph_config.prefill.backend` must both
    name the flag (they once disagreed: the evidence said "set by SGLang")."""
    a = _v0523(
        _script(7, "2026-11-01 10:00:00"), "2026-11-01", mrr=64, kv=400000, prefill="breakable"
    )
    b = _v0523(
        _script(8, "2026-11-02 10:00:00", CMD + " --cuda-graph-backend-prefill disabled"),
        "2026-11-02",
        mrr=64,
        kv=400000,
        prefill="disabled",
        flag="disabled",
    )
    return [a, b]


def crash_loop() -> list[StartupScript]:
    """A ready start, then three starts that die before ready (PID 1's status and SGLang's reason)."""
    scripts = [
        _v0523(
            _script(3, "2026-03-10 09:00:00"), "2026-03-10", mrr=64, kv=400000, prefill="breakable"
        )
    ]
    for i in range(3):
        s = _script(4 + i, f"2026-03-11 10:0{i}:00")
        s.started(f"2026-03-11 10:0{i}:00")
        s.line(f"[2026-03-11 10:0{i}:05 TP0] Load weight begin. avail mem=20.00 GB")
        s.line(
            f"[2026-03-11 10:0{i}:20 TP0] Scheduler hit an exception: Traceback (most recent call last):"
        )
        s.line(
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            "Current value: mem_fraction_static=0.93",
            when=f"2026-03-11 10:0{i}:20",
        )
        s.process_exited(1, when=f"2026-03-11 10:0{i}:21")
        s.failed("exit-code", when=f"2026-03-11 10:0{i}:21")
        scripts.append(s)
    return scripts


def pinned_baseline() -> list[StartupScript]:
    """Two starts short of capacity, the second like the first, on a host whose pinned baseline
    (baseline.json, imported before the scan) came from a good start elsewhere. Against the
    previous ready startup the second has nothing to say; against the pin both are down."""
    return [
        _v0523(
            _script(10, "2026-11-04 10:00:00"), "2026-11-04", mrr=40, kv=250000, prefill="breakable"
        ),
        _v0523(
            _script(11, "2026-11-05 10:00:00"), "2026-11-05", mrr=40, kv=250000, prefill="breakable"
        ),
    ]


def pinned_baseline_source() -> list[StartupScript]:
    """The good start on the other host that pinned-baseline's baseline.json was exported from."""
    return [
        _v0523(
            _script(9, "2026-11-03 10:00:00"), "2026-11-03", mrr=64, kv=400000, prefill="breakable"
        )
    ]


CASES: dict[str, Callable[[], list[StartupScript]]] = {
    "sglang-0523-prefill-off": sglang_0523_prefill_off,
    "sglang-0523-prefill-flag": sglang_0523_prefill_flag,
    "crash-loop": crash_loop,
    "pinned-baseline": pinned_baseline,
}


# Cases whose scan starts from a pinned baseline: the case -> the startups it is exported from.
BASELINES: dict[str, Callable[[], list[StartupScript]]] = {
    "pinned-baseline": pinned_baseline_source,
}


def write_baseline(name: str, build: Callable[[], list[StartupScript]]) -> Path:
    """`sentinel baseline --export` of the last ready startup of `build`'s journal."""
    out = HERE / name / "baseline.json"
    with tempfile.TemporaryDirectory() as tmp:
        export = Path(tmp) / "source.export"
        write_export([e for script in build() for e in script.entries()], export)
        journal = build_journal(export, Path(tmp) / "journal", "source")
        state = ["--state-dir", str(Path(tmp) / "state"), "--unit", "sglang-qwen.service"]
        for argv in (
            ["scan", "--journal-dir", str(journal), *state],
            ["baseline", *state, "--pin", "latest"],
            ["baseline", *state, "--export", str(out)],
        ):
            if sentinel(argv) != 0:
                raise SystemExit(f"sentinel {' '.join(argv)} failed")
    return out


def main() -> None:
    for name, build in CASES.items():
        entries = [e for script in build() for e in script.entries()]
        (HERE / name).mkdir(exist_ok=True)
        write_export(entries, HERE / name / "journal.export")
        print(f"wrote {HERE / name / 'journal.export'} ({len(entries)} entries)")
    for name, build in BASELINES.items():
        print(f"wrote {write_baseline(name, build)}")


if __name__ == "__main__":
    main()
