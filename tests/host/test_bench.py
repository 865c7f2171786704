"""The benchmark harness cannot rot: the generator writes the stated mix, and the mtail program
finds the same facts as the sentinel (else `make bench` would compare tools doing different work)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from sentinelproc import scrape_in_process  # noqa: E402

from bench import generate  # noqa: E402
from sglang_sentinel.state import StateStore  # noqa: E402

N = 6000

# Outside CI a missing tool skips; in CI (bootstrap installs both) it must fail instead.
pytestmark = pytest.mark.skipif(
    not generate.JOURNAL_REMOTE.exists() and not os.environ.get("CI"),
    reason="systemd-journal-remote is not installed",
)


@pytest.fixture(scope="module")
def small_journal(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("bench") / "journal"
    return out, generate.build(N, out)


def unit_lines(journal: Path, unit: str = generate.UNIT) -> list[str]:
    out = subprocess.run(
        ["journalctl", "--no-pager", "-D", str(journal), "-u", unit, "-o", "cat"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.splitlines()


def test_generator_writes_the_stated_mix(small_journal: tuple[Path, dict[str, Any]]) -> None:
    """N entries in several files, 75 % from the SGLang unit, every layout and kind present."""
    journal, manifest = small_journal
    assert manifest["entries"] == N
    assert manifest["other_entries"] == round(N * generate.OTHER_SHARE)
    assert manifest["unit_entries"] == N - manifest["other_entries"]
    assert len(manifest["files"]) >= 2
    kinds = Counter(manifest["kinds"])
    assert {"decode", "prefill", "access", "startup", "pid1"} <= set(kinds)
    assert len([k for k in kinds if k.startswith("other:")]) >= 5
    lines = unit_lines(journal)
    # journalctl -u sees exactly the unit's entries, PID 1's lines about it included.
    assert len(lines) == manifest["unit_entries"]
    text = "\n".join(lines)
    assert "] Decode batch. #running-req: " in text  # <= 0.5.3: a period
    assert (
        "mamba usage: " in text and ", #queue-req: 0, cuda graph: False, input throughput" in text
    )
    assert "#pending-token: " in text  # 0.5.23
    assert text.count("server_args=ServerArgs(") == len(generate.VERSIONS)
    assert text.count("max_total_num_tokens=") == len(generate.VERSIONS)
    # The other units' entries interleave with the unit's, they do not come in one block.
    assert sum(1 for line in lines[: len(lines) // 2] if "Decode batch" in line) > 0


def test_mtail_program_finds_what_the_sentinel_finds(
    small_journal: tuple[Path, dict[str, Any]],
    tmp_path: Path,
) -> None:
    """max_running_requests, KV tokens, PCG, MoE configs and throughput agree with sentinel scan."""
    if shutil.which("mtail") is None and not os.environ.get("CI"):
        pytest.skip("mtail is not installed (apt-get install mtail)")
    journal, manifest = small_journal
    state = tmp_path / "state"
    subprocess.run(
        [
            str(Path(sys.executable).with_name("sentinel")),
            "scan",
            "--journal-dir",
            str(journal),
            "--state-dir",
            str(state),
            "--unit",
            generate.UNIT,
            "--json",
        ],
        capture_output=True,
        check=True,
    )
    records = StateStore(state, readonly=True).startups([generate.UNIT])
    expected = manifest["startups"]
    assert [r.fact("max_running_requests") for r in records] == [
        s["max_running_requests"] for s in expected
    ]
    assert [r.fact("kv_cache_tokens") for r in records] == [s["kv_cache_tokens"] for s in expected]

    log = tmp_path / "unit.txt"
    log.write_text("\n".join(unit_lines(journal)) + "\n")
    out = subprocess.run(
        [
            "mtail",
            "--one_shot",
            "--one_shot_format",
            "json",
            "--logtostderr",
            "--port",
            "0",
            "--progs",
            str(REPO / "bench/mtail"),
            "--logs",
            str(log),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    metrics = json.loads(out)

    def gauge(name: str) -> object:
        return metrics[name][0]["LabelValues"][0]["Value"]["Value"]

    latest = records[-1]
    assert gauge("sglang_startups_total") == len(records)
    assert gauge("sglang_max_running_requests") == latest.fact("max_running_requests")
    assert gauge("sglang_max_total_num_tokens") == latest.fact("max_total_num_tokens")
    assert gauge("sglang_kv_cache_tokens") == latest.fact("kv_cache_tokens")
    # The sentinel's latest batch-line value is in memory only: its /metrics says it.
    page = scrape_in_process(journal, tmp_path / "scrape", [generate.UNIT])
    series = f'sglang_sentinel_generation_throughput_tokens_per_second{{unit="{generate.UNIT}"}} '
    (sentinel_gen,) = [float(x[len(series) :]) for x in page.splitlines() if x.startswith(series)]
    assert gauge("sglang_gen_throughput_tokens_per_second") == sentinel_gen
    assert sentinel_gen == expected[-1]["last_gen_throughput"]
    # The last startup that logged a PCG line decides mtail's gauge.
    pcg = [
        r.fact("piecewise_cuda_graph")
        for r, s in zip(records, expected, strict=True)
        if s["piecewise_cuda_graph"] is not None
    ]
    assert gauge("sglang_piecewise_cuda_graph_enabled") == int(bool(pcg[-1]))
    moe = {lv["Labels"][0] for lv in metrics["sglang_moe_config_missing_total"][0]["LabelValues"]}
    assert moe == {name for r in records for name in _names(r.fact("moe_config_missing"))}


def _names(value: object) -> tuple[str, ...]:
    """A list fact's items (a tuple of names), or none."""
    return tuple(str(v) for v in value) if isinstance(value, tuple) else ()


def test_lower_bound_readers_read_what_the_floor_reads(
    small_journal: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    """bench.lowerbound's C reader and the Python floor read the same unit entries, and see the
    invocation change once per startup of the generated journal (else its bound means nothing)."""
    from bench import lowerbound

    journal, manifest = small_journal
    exe = lowerbound.build_reader(tmp_path)
    doc = lowerbound.measure(journal, manifest, exe, runs=1)
    # The unit's own lines: the manifest counts PID 1's lines about the unit with them.
    assert doc["unit_lines"] == manifest["unit_entries"] - manifest["kinds"]["pid1"]
    assert doc["invocation_changes"] == len(manifest["startups"])
    assert set(doc["cpu_s"]) == {
        "a",
        "a_invocation",
        "python",
        "imports",
        "d",
        *(f"c_{mode}" for mode in lowerbound.C_MODES),
    }
    assert "exact bound" in lowerbound.render(
        {"runs_each": 1, "target_over_floor": 1.5, "journals": {"single": doc}}
    )
