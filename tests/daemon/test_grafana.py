"""The Grafana dashboard (deploy/grafana/): generated, current, well-formed, and every query works.

The last test is end to end with real binaries: a `sentinel run` follows a journal of three units
(regressed, OK with decode lines, failed), Debian's `prometheus` scrapes it on loopback with temp
storage, and every panel's query must return data.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pagescenario
import pytest
from sentinelproc import Sentinels, cli_stdout, free_port, wait_until
from test_alert_rules import tool
from test_alertmanager_e2e import PROMETHEUS, Process, http_get, require_binary, wait_for

from tools import grafana

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "deploy" / "grafana" / "sglang-sentinel.json"
DS = {"type": "prometheus", "uid": "${datasource}"}
# What Grafana puts in place of its variables, for running the queries outside Grafana.
SUBSTITUTE = {"job": ".*", "instance": ".*", "unit": ".*", "__rate_interval": "30s"}


def load() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return doc


def concrete(expr: str) -> str:
    return re.sub(r"\$(\w+)", lambda m: SUBSTITUTE[m.group(1)], expr)


def generator(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tools.grafana", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )


def test_committed_dashboard_is_current_and_check_fails_when_stale(tmp_path: Path) -> None:
    ok = generator("--check")
    assert ok.returncode == 0, ok.stderr
    stale = tmp_path / "stale.json"
    stale.write_text(DASHBOARD.read_text().replace('"Startup timeline"', '"Edited by hand"'))
    result = generator("--check", "--output", str(stale))
    assert result.returncode == 1
    assert result.stderr == f"{stale} is stale: run `make dashboard` and commit it\n"


def _walk(node: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from _walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item)


def test_dashboard_is_well_formed() -> None:
    """Valid JSON, schemaVersion ≥ 39, unique ids, a tidy grid, one datasource variable."""
    doc = load()
    assert doc["schemaVersion"] >= 39
    panels = doc["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), ids
    cells: dict[tuple[int, int], int] = {}
    for p in panels:
        pos = p["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, p["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"{p['title']} overlaps panel {cells[(x, y)]}"
                cells[(x, y)] = p["id"]
    [ds_var] = [v for v in doc["templating"]["list"] if v["type"] == "datasource"]
    assert ds_var["name"] == "datasource" and ds_var["query"] == "prometheus"
    # No hard-coded datasource: every uid anywhere is the variable.
    assert {v for k, v in _walk(doc) if k == "uid" and v != doc["uid"]} == {"${datasource}"}
    for p in panels:
        if p["type"] == "row":
            continue
        assert p["datasource"] == DS and p["targets"], p["title"]
        assert p["description"], p["title"]
        assert all(t["datasource"] == DS for t in p["targets"]), p["title"]
    for v in doc["templating"]["list"]:
        if v["type"] == "query":
            assert v["datasource"] == DS


def test_every_queried_metric_is_exported_by_the_collector() -> None:
    """Names read from a fresh registry with the sentinel's collector, not from a hand list."""
    exported = grafana.exported_metric_names()
    used = {n for _, e in grafana.queries(load()) for n in grafana.METRIC_NAME.findall(e)}
    assert used and used <= exported, sorted(used - exported)
    # The check names an unknown metric and where it is used.
    doc = load()
    doc["panels"][1]["targets"][0]["expr"] = "sglang_sentinel_no_such_metric"
    assert grafana.problems(doc, None) == [
        f"panel {doc['panels'][1]['id']} {doc['panels'][1]['title']!r} A: "
        "sglang_sentinel_no_such_metric is not exported by the sentinel (sglang_sentinel/daemon/metrics.py)"
    ]


def _rule_file(exprs: list[str], path: Path) -> Path:
    rules = [{"record": f"dashboard:query_{i}", "expr": concrete(e)} for i, e in enumerate(exprs)]
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    return path


def test_every_query_parses_with_promtool(tmp_path: Path) -> None:
    """Each expression, variables substituted, loaded as a recording rule by promtool."""
    promtool = tool("promtool", "prometheus")
    exprs = [e for _, e in grafana.queries(load())]
    result = subprocess.run(
        [promtool, "check", "rules", str(_rule_file(exprs, tmp_path / "d.yml"))],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in result.stdout
    broken = _rule_file(["sum(rate(sglang_sentinel_journal_up[5m])"], tmp_path / "b.yml")
    bad = subprocess.run(
        [promtool, "check", "rules", str(broken)], capture_output=True, text=True, check=False
    )
    assert bad.returncode == 1 and "parse error" in bad.stderr + bad.stdout


@pytest.mark.slow
def test_every_panel_query_returns_data_from_prometheus(
    tmp_path: Path, sentinels: Sentinels
) -> None:
    prometheus = require_binary(PROMETHEUS, "prometheus")
    scenario = pagescenario.build(tmp_path)
    state = tmp_path / "state"
    units = [arg for unit in scenario.units for arg in ("--unit", unit)]
    journal = ["--journal-dir", str(scenario.journal_dir)]
    # The daemon reads the journal itself (so its journal gauges exist); the baseline is pinned
    # while it runs, as an operator would.
    daemon = sentinels.start(*journal, *units, state=state)
    # The daemon publishes after each slice it reads: the failed unit's startup can be on
    # /metrics before the stalled and decoding units' (later in the journal) are read. Wait
    # for the last ones too.
    read_all = [
        f'sglang_sentinel_startup_ready{{unit="{scenario.failed_unit}"}} 0.0',
        f'sglang_sentinel_startup_in_progress{{unit="{scenario.stalled_unit}"}} 1.0',
        *(
            f'sglang_sentinel_regression{{check="{check}",severity="warning",'
            f'unit="{scenario.decode_unit}"}} 1.0'
            for check in ("decode_throughput_drop", "decode_without_cuda_graph")
        ),
    ]
    wait_until(
        daemon.scrape_when(lambda body: all(s in body for s in read_all)),
        30,
        "the daemon recording every unit's startups",
    )
    cli_stdout(
        "baseline",
        "--state-dir",
        str(state),
        "--unit",
        scenario.seed_unit,
        "--pin",
        pagescenario.SEED_BASELINE[:8],
        timeout=30,
    )
    wait_until(
        daemon.scrape_with(f'sglang_sentinel_baseline_pinned{{unit="{scenario.seed_unit}"}} 1.0'),
        30,
        "the daemon seeing the pinned baseline",
    )

    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: sglang-sentinel\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{daemon.port}']\n"
    )
    port = free_port()
    log = tmp_path / "prometheus.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                str(prometheus),
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'prom-data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    prom = Process("prometheus", proc, log)
    try:
        base = f"http://127.0.0.1:{port}"

        def query(expr: str) -> list[Any]:
            url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
            status, body = http_get(url)
            if status != 200:
                return []
            return list(json.loads(body)["data"]["result"])

        # Enough scrapes for a 30 s rate window to hold two samples.
        wait_for(
            "three scrapes of the sentinel", lambda: query("count_over_time(up[1m]) >= 3"), 60, prom
        )
        panels = [
            (where, expr) for where, expr in grafana.queries(load()) if where.startswith("panel")
        ]
        started = time.monotonic()
        empty = panels
        while empty and time.monotonic() - started < 30:
            empty = [(w, e) for w, e in empty if not query(concrete(e))]
            if empty:
                time.sleep(0.5)
        assert empty == [], "panel queries without data:\n" + "\n".join(
            f"{w}: {e}" for w, e in empty
        )
        # And the data is the scenario's.
        exprs = {w.split("'")[1] + " " + w.rsplit(" ", 1)[1]: e for w, e in panels}
        table = query(concrete(exprs["Active regressions A"]))
        assert sorted(
            (r["metric"]["unit"], r["metric"]["check"], r["metric"]["severity"]) for r in table
        ) == sorted(
            [
                (scenario.seed_unit, "max_running_requests_drop", "critical"),
                (scenario.seed_unit, "kv_cache_tokens_drop", "warning"),
                (scenario.seed_unit, "piecewise_cuda_graph_disabled", "warning"),
                (scenario.failed_unit, "startup_failed", "critical"),
                (scenario.stalled_unit, "startup_stalled", "warning"),
                (scenario.decode_unit, "decode_throughput_drop", "warning"),
                (scenario.decode_unit, "decode_without_cuda_graph", "warning"),
            ]
        )

        def value(title: str) -> str:
            [result] = query(concrete(exprs[title]))
            return str(result["value"][1])

        assert value("Units with a critical regression A") == "2"  # the seed, the failed unit
        assert value("Units with warnings only A") == "2"  # the stalled and decoding units
        assert value("Latest startup failed A") == "1"
        assert value("Startups under way A") == "1"
        timeline = query(concrete(exprs["Startup timeline A"]))
        assert {r["metric"]["unit"]: r["value"][1] for r in timeline} == {
            scenario.seed_unit: "1",
            scenario.ok_unit: "1",
            scenario.failed_unit: "0",
            scenario.stalled_unit: "7",  # ready before, a startup under way, stalled
            scenario.decode_unit: "1",
        }
        [ratio] = query(concrete(exprs["Decode throughput at like load vs baseline A"]))
        assert ratio["metric"]["unit"] == scenario.decode_unit
        assert float(ratio["value"][1]) == pytest.approx(0.8, abs=0.05)  # 20 % slower
        verdicts = query(concrete(exprs["Decode verdict A"]))
        assert {r["metric"]["unit"]: r["metric"]["verdict"] for r in verdicts} == {
            unit: "regressed" if unit == scenario.decode_unit else "inconclusive"
            for unit in scenario.units
        }
        phases = query(concrete(exprs["Startup phase durations (latest vs baseline) A"]))
        assert {
            r["metric"]["phase"]: float(r["value"][1])
            for r in phases
            if r["metric"]["unit"] == scenario.decode_unit
        } == {
            "weight_load": 60.0,
            "kv_allocation": 3.0,
            "graph_capture": 10.0,
            "time_to_ready": 90.0,
        }
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=10)
