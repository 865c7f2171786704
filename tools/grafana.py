"""The Grafana dashboard, generated from code: `python -m tools.grafana [--check]` (`make dashboard`).

A build-time tool: nothing in the package imports it, and a run never loads it.

Plain dicts, no SDK (as vLLM generates its dashboards). The JSON is committed at
deploy/grafana/sglang-sentinel.json; `--check` fails when that file is stale or when a query names
a metric the sentinel's collector does not export. Every query goes through the `${datasource}`
variable (no hard-coded datasource uid) and the `$job`, `$instance` and `$unit` variables.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from sglang_sentinel.compare import Snapshot
from sglang_sentinel.daemon import PREFIX, SentinelCollector
from sglang_sentinel.model import Stats

DASHBOARD_PATH = (
    Path(__file__).resolve().parent.parent / "deploy" / "grafana" / "sglang-sentinel.json"
)
DS = {"type": "prometheus", "uid": "${datasource}"}
SEL = 'job=~"$job", instance=~"$instance", unit=~"$unit"'
METRIC_NAME = re.compile(r"\bsglang_sentinel_[a-z0-9_]+")
BY = "instance, unit"  # a unit name is unique per host, not across a fleet

Panel = dict[str, Any]


def _at(severity: str) -> str:
    return f'({PREFIX}regression{{{SEL}, severity="{severity}"}} == 1)'


# One row per firing check at the highest severity it reached (a check that reached critical may
# also have its warning series at 1).
ACTIVE_REGRESSIONS = (
    f"{_at('critical')} or on ({BY}, check) {_at('warning')} or on ({BY}, check) {_at('info')}"
)


def exported_metric_names() -> set[str]:
    """Every series name the sentinel's collector exports, read from a fresh registry."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(
        # Stats that say an entry was read, so the optional journal gauges appear too.
        SentinelCollector(lambda: Snapshot(stats=Stats(last_entry_realtime=0.0)))
    )
    names: set[str] = set()
    for family in registry.collect():
        suffixes = {"counter": ("_total",), "info": ("_info",)}.get(family.type, ("",))
        names.update(family.name + s for s in suffixes)
    return names


# -- builders ---------------------------------------------------------------------------------------


class _Grid:
    """Places panels left to right on Grafana's 24-column grid, wrapping to a new row."""

    def __init__(self) -> None:
        self.x = self.y = self.row_h = 0
        self.ids = iter(range(1, 1000))

    def place(self, w: int, h: int) -> dict[str, int]:
        if self.x + w > 24:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        pos = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.x += w
        self.row_h = max(self.row_h, h)
        return pos

    def row(self, title: str) -> Panel:
        if self.x:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        panel = {
            "type": "row",
            "id": next(self.ids),
            "title": title,
            "collapsed": False,
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y},
            "panels": [],
        }
        self.y += 1
        return panel


def target(
    expr: str, legend: str = "", ref: str = "A", *, instant: bool = False, table: bool = False
) -> dict[str, Any]:
    t: dict[str, Any] = {
        "datasource": DS,
        "refId": ref,
        "expr": expr,
        "legendFormat": legend or "__auto",
        "range": not instant,
        "instant": instant,
    }
    if table:
        t["format"] = "table"
    return t


def panel(
    grid: _Grid,
    kind: str,
    title: str,
    description: str,
    targets: Sequence[dict[str, Any]],
    w: int,
    h: int,
    *,
    unit: str = "short",
    options: dict[str, Any] | None = None,
    field: dict[str, Any] | None = None,
    overrides: Sequence[dict[str, Any]] = (),
    transformations: Sequence[dict[str, Any]] = (),
) -> Panel:
    defaults: dict[str, Any] = {"unit": unit}
    defaults.update(field or {})
    p: Panel = {
        "type": kind,
        "id": next(grid.ids),
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": grid.place(w, h),
        "targets": list(targets),
        "fieldConfig": {"defaults": defaults, "overrides": list(overrides)},
        "options": options or {},
    }
    if transformations:
        p["transformations"] = list(transformations)
    return p


def _thresholds(*steps: tuple[float | None, str]) -> dict[str, Any]:
    return {"mode": "absolute", "steps": [{"value": v, "color": c} for v, c in steps]}


def _stat(grid: _Grid, title: str, description: str, expr: str, bad: str) -> Panel:
    return panel(
        grid,
        "stat",
        title,
        description,
        [target(expr, title, instant=True)],
        w=4,
        h=4,
        options={
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "background",
            "graphMode": "none",
            "textMode": "value",
        },
        field={"thresholds": _thresholds((None, "green"), (1, bad)), "decimals": 0},
    )


_DASHED = {
    "matcher": {"id": "byRegexp", "options": ".*baseline.*"},
    "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}],
}


def _peer_ratio(name: str) -> str:
    """A fact of each selected server over the median of its peers (same model, TP size, GPU)."""

    def with_peer_labels(selector: str) -> str:
        return (
            f"({PREFIX}{name}{{{selector}}} * on (job, instance, unit)"
            f' group_left (model, tp_size, gpu) {PREFIX}server_info{{{selector}, model!=""}})'
        )

    fleet = 'job=~"$job"'  # the median is over the whole job, whatever instance/unit is shown
    return (
        f"{with_peer_labels(SEL)} / on (model, tp_size, gpu) group_left ()"
        f" quantile by (model, tp_size, gpu) (0.5, {with_peer_labels(fleet)})"
    )


def _vs_baseline(grid: _Grid, title: str, description: str, name: str, unit: str) -> Panel:
    return panel(
        grid,
        "timeseries",
        title,
        description,
        [
            target(f"{PREFIX}{name}{{{SEL}}}", "{{instance}} {{unit}}", "A"),
            target(f"{PREFIX}baseline_{name}{{{SEL}}}", "{{instance}} {{unit}} baseline", "B"),
        ],
        w=8,
        h=8,
        unit=unit,
        field={"custom": {"lineInterpolation": "stepAfter", "showPoints": "never"}},
        overrides=[_DASHED],
    )


# -- the dashboard ----------------------------------------------------------------------------------


def _panels() -> Iterator[Panel]:
    g = _Grid()
    yield g.row("Now")
    yield _stat(
        g,
        "Units with a critical regression",
        "Units whose latest startup has at least one critical finding against its baseline.",
        f'sum(max by ({BY}) ({PREFIX}regression{{{SEL}, severity="critical"}}))',
        "red",
    )
    yield _stat(
        g,
        "Units with warnings only",
        "Units whose latest startup has warning findings and no critical one.",
        f'count(max by ({BY}) ({PREFIX}regression{{{SEL}, severity="warning"}}) == 1'
        f' unless on ({BY}) max by ({BY}) ({PREFIX}regression{{{SEL}, severity="critical"}}) == 1)'
        " or vector(0)",
        "orange",
    )
    yield _stat(
        g,
        "Latest startup failed",
        "Units whose latest decided startup failed before it was ready.",
        f"sum(1 - {PREFIX}startup_ready{{{SEL}}})",
        "red",
    )
    yield _stat(
        g,
        "Startups under way",
        "Units with a startup that is neither ready nor failed yet.",
        f"sum({PREFIX}startup_in_progress{{{SEL}}})",
        "blue",
    )
    yield _stat(
        g,
        "Units without a baseline",
        "Units whose latest startup had nothing to compare with (pin one: sentinel baseline --pin).",
        f"count({PREFIX}baseline_present{{{SEL}}} == 0) or vector(0)",
        "orange",
    )
    yield _stat(
        g,
        "Sentinels with a journal problem",
        "Sentinels that cannot read the journal.",
        f'count({PREFIX}journal_up{{job=~"$job", instance=~"$instance"}} == 0) or vector(0)',
        "red",
    )
    yield panel(
        g,
        "table",
        "Active regressions",
        "Every finding of the latest startups, with its severity (see the runbook per check).",
        [target(ACTIVE_REGRESSIONS, ref="A", instant=True, table=True)],
        w=24,
        h=7,
        options={"showHeader": True, "sortBy": [{"displayName": "severity", "desc": False}]},
        transformations=[
            {
                "id": "organize",
                "options": {
                    "excludeByName": {"Time": True, "Value": True, "__name__": True, "job": True},
                    "indexByName": {"severity": 0, "instance": 1, "unit": 2, "check": 3},
                },
            }
        ],
        overrides=[
            {
                "matcher": {"id": "byName", "options": "severity"},
                "properties": [
                    {"id": "custom.cellOptions", "value": {"type": "color-background"}},
                    {
                        "id": "mappings",
                        "value": [
                            {
                                "type": "value",
                                "options": {
                                    "critical": {"text": "✖ critical", "color": "red"},
                                    "warning": {"text": "⚠ warning", "color": "orange"},
                                    "info": {"text": "ℹ info", "color": "blue"},
                                },
                            }
                        ],
                    },
                ],
            }
        ],
    )

    yield g.row("Startup facts against the baseline, across startups")
    yield _vs_baseline(
        g,
        "max_running_requests vs baseline",
        "Effective max_running_requests of each startup (solid) and of its baseline (dashed).",
        "max_running_requests",
        "short",
    )
    yield _vs_baseline(
        g,
        "KV cache tokens vs baseline",
        "Tokens in the allocated KV cache (solid) and the baseline's (dashed).",
        "kv_cache_tokens",
        "short",
    )
    yield _vs_baseline(
        g,
        "Free GPU memory at load vs baseline",
        "Free GPU memory at 'Load weight begin' (solid) and the baseline's (dashed).",
        "load_available_gpu_memory_bytes",
        "bytes",
    )
    yield panel(
        g,
        "timeseries",
        "Capacity relative to the baseline",
        "Latest startup's value divided by the baseline's: 1 is the baseline; the default policy "
        "warns below 0.95 (max_running_requests) and 0.9 (KV tokens).",
        [
            target(
                f"{PREFIX}max_running_requests{{{SEL}}} / {PREFIX}baseline_max_running_requests{{{SEL}}}",
                "{{instance}} {{unit}} max_running_requests",
                "A",
            ),
            target(
                f"{PREFIX}kv_cache_tokens{{{SEL}}} / {PREFIX}baseline_kv_cache_tokens{{{SEL}}}",
                "{{instance}} {{unit}} KV cache tokens",
                "B",
            ),
        ],
        w=12,
        h=8,
        unit="percentunit",
        field={
            "custom": {"lineInterpolation": "stepAfter", "thresholdsStyle": {"mode": "dashed"}},
            "thresholds": _thresholds((None, "red"), (0.9, "orange"), (0.95, "transparent")),
        },
    )
    yield panel(
        g,
        "timeseries",
        "CUDA graphs and MoE configs",
        "1 = captured; the MoE line counts missing Triton kernel config files (untuned kernels).",
        [
            target(f"{PREFIX}cuda_graph_enabled{{{SEL}}}", "{{instance}} {{unit}} CUDA graph", "A"),
            target(
                f"{PREFIX}piecewise_cuda_graph_enabled{{{SEL}}}",
                "{{instance}} {{unit}} piecewise CUDA graph",
                "B",
            ),
            target(
                f"{PREFIX}moe_configs_missing{{{SEL}}}",
                "{{instance}} {{unit}} MoE configs missing",
                "C",
            ),
        ],
        w=12,
        h=8,
        field={"custom": {"lineInterpolation": "stepAfter"}, "decimals": 0},
    )

    yield g.row("Fleet: peers of the same model, TP size and GPU")
    yield panel(
        g,
        "timeseries",
        "max_running_requests relative to the peer median",
        "Each server's max_running_requests divided by the median of its peers (same model, TP "
        "size and GPU, over the selected job). The fleet rules (deploy/prometheus/"
        "sglang-sentinel-fleet.yml) alert below 0.9 with at least 3 peers.",
        [target(_peer_ratio("max_running_requests"), "{{instance}} {{unit}}")],
        w=12,
        h=8,
        unit="percentunit",
        field={
            "custom": {"lineInterpolation": "stepAfter", "thresholdsStyle": {"mode": "dashed"}},
            "thresholds": _thresholds((None, "orange"), (0.9, "transparent")),
        },
    )
    yield panel(
        g,
        "table",
        "Pinned baselines in use",
        "The pinned baseline of each server by content hash (as `sentinel baseline --export` "
        "writes it): servers of one model, TP size and GPU should share one.",
        [
            target(
                f"max by (instance, unit, model, tp_size, gpu, sha256)"
                f" ({PREFIX}baseline_info{{{SEL}}})",
                ref="A",
                instant=True,
                table=True,
            )
        ],
        w=12,
        h=8,
        transformations=[
            {
                "id": "organize",
                "options": {
                    "excludeByName": {"Time": True, "Value": True},
                    "indexByName": {"model": 0, "tp_size": 1, "gpu": 2, "sha256": 3},
                },
            }
        ],
    )

    yield g.row("Startups")
    yield panel(
        g,
        "state-timeline",
        "Startup timeline",
        "Per unit: ready or failed (the latest decided startup), starting (a startup under way) "
        "or stalled (under way for longer than the startup_stalled policy allows).",
        [
            target(
                # ready 1 / failed 0, + 2 while a startup is under way, + 4 once it is stalled;
                # a unit whose first startup is under way has no startup_ready yet.
                f"(max by ({BY}) ({PREFIX}startup_ready{{{SEL}}})"
                f" or 0 * max by ({BY}) ({PREFIX}startup_in_progress{{{SEL}}}))"
                f" + 2 * max by ({BY}) ({PREFIX}startup_in_progress{{{SEL}}})"
                f' + 4 * max by ({BY}) ({PREFIX}regression{{{SEL}, check="startup_stalled"}})',
                "{{instance}} {{unit}}",
            )
        ],
        w=16,
        h=8,
        options={"showValue": "never", "mergeValues": True, "rowHeight": 0.8},
        field={
            "color": {"mode": "thresholds"},
            "thresholds": _thresholds((None, "red"), (1, "green"), (2, "blue"), (4, "orange")),
            "mappings": [
                {
                    "type": "value",
                    "options": {
                        "0": {"text": "failed", "color": "red", "index": 0},
                        "1": {"text": "ready", "color": "green", "index": 1},
                    },
                },
                {
                    "type": "range",
                    "options": {
                        "from": 2,
                        "to": 3,
                        "result": {"text": "starting", "color": "blue"},
                    },
                },
                {
                    "type": "range",
                    "options": {
                        "from": 4,
                        "to": 7,
                        "result": {"text": "stalled", "color": "orange"},
                    },
                },
            ],
        },
    )
    yield panel(
        g,
        "bargauge",
        "Startups by outcome",
        "Startups the sentinel recorded per unit and outcome (counted from its state).",
        [
            target(
                f"sum by ({BY}, outcome) ({PREFIX}startups_total{{{SEL}}})",
                "{{unit}} {{outcome}}",
                instant=True,
            )
        ],
        w=8,
        h=8,
        options={"orientation": "horizontal", "displayMode": "basic", "showUnfilled": True},
        field={"decimals": 0},
    )
    yield panel(
        g,
        "bargauge",
        "Startup phase durations (latest vs baseline)",
        "Weight load, KV cache allocation, CUDA graph capture and time to ready, from the first "
        "line of each phase, for the latest startup and its baseline.",
        [
            target(
                f"{PREFIX}startup_phase_seconds{{{SEL}}}", "{{unit}} {{phase}}", "A", instant=True
            ),
            target(
                f"{PREFIX}baseline_startup_phase_seconds{{{SEL}}}",
                "{{unit}} {{phase}} (baseline)",
                "B",
                instant=True,
            ),
        ],
        w=12,
        h=8,
        unit="s",
        options={"orientation": "horizontal", "displayMode": "basic", "showUnfilled": True},
    )
    yield panel(
        g,
        "timeseries",
        "Time to ready across startups",
        "Service start to ready per startup (solid) and the baseline's (dashed).",
        [
            target(f"{PREFIX}startup_duration_seconds{{{SEL}}}", "{{instance}} {{unit}}", "A"),
            target(
                f"{PREFIX}baseline_startup_duration_seconds{{{SEL}}}",
                "{{instance}} {{unit}} baseline",
                "B",
            ),
        ],
        w=12,
        h=8,
        unit="s",
        field={"custom": {"lineInterpolation": "stepAfter"}},
        overrides=[_DASHED],
    )

    yield g.row("Decode throughput against the baseline")
    yield panel(
        g,
        "timeseries",
        "Decode throughput at like load vs baseline",
        "Current / baseline decode throughput compared at like load (same captured batch and "
        "context buckets); absent while inconclusive. The default policy warns below 0.9 and "
        "is critical below 0.75 (docs/decode-throughput.md).",
        [target(f"{PREFIX}decode_throughput_ratio{{{SEL}}}", "{{instance}} {{unit}}")],
        w=12,
        h=8,
        unit="percentunit",
        field={
            "custom": {"lineInterpolation": "stepAfter", "thresholdsStyle": {"mode": "dashed"}},
            "thresholds": _thresholds((None, "red"), (0.75, "orange"), (0.9, "transparent")),
        },
    )
    yield panel(
        g,
        "table",
        "Decode verdict",
        "The decode comparison's verdict per unit (regressed, improved, unchanged, inconclusive)"
        " and the clean like-load samples behind it.",
        [
            target(
                f"max by ({BY}, verdict) ({PREFIX}decode_verdict{{{SEL}}}) == 1",
                ref="A",
                instant=True,
                table=True,
            ),
        ],
        w=12,
        h=8,
        transformations=[
            {
                "id": "organize",
                "options": {"excludeByName": {"Time": True, "Value": True}},
            }
        ],
    )
    yield panel(
        g,
        "timeseries",
        "Decode median per like-load bucket vs baseline",
        "Median gen throughput of each bucket (solid) and the baseline's (dashed).",
        [
            target(
                f"{PREFIX}decode_bucket_median_tokens_per_second{{{SEL}}}",
                "{{unit}} {{bucket}}",
                "A",
            ),
            target(
                f"{PREFIX}baseline_decode_bucket_median_tokens_per_second{{{SEL}}}",
                "{{unit}} {{bucket}} baseline",
                "B",
            ),
        ],
        w=12,
        h=8,
        unit="tokens/s",
        overrides=[_DASHED],
    )
    yield panel(
        g,
        "timeseries",
        "Decode lines without CUDA graph vs baseline",
        "Share of decode lines with `cuda graph: False` (eager decode) in the latest startup "
        "(solid) and the baseline (dashed).",
        [
            target(
                f"{PREFIX}decode_without_cuda_graph_ratio{{{SEL}}}", "{{instance}} {{unit}}", "A"
            ),
            target(
                f"{PREFIX}baseline_decode_without_cuda_graph_ratio{{{SEL}}}",
                "{{instance}} {{unit}} baseline",
                "B",
            ),
        ],
        w=6,
        h=8,
        unit="percentunit",
        overrides=[_DASHED],
    )
    yield panel(
        g,
        "timeseries",
        "Retractions and decode OOM lines",
        "`Retract requests` and `Decode/Prefill out of memory` lines in the latest startup.",
        [
            target(
                f"{PREFIX}decode_retractions{{{SEL}}}", "{{instance}} {{unit}} retractions", "A"
            ),
            target(
                f"{PREFIX}decode_out_of_memory_lines{{{SEL}}}",
                "{{instance}} {{unit}} out of memory",
                "B",
            ),
        ],
        w=6,
        h=8,
        field={"decimals": 0},
    )
    yield panel(
        g,
        "timeseries",
        "max_running_requests vs largest captured CUDA graph",
        "Admitting more requests than the largest captured decode CUDA-graph batch runs decode "
        "eager once the batch grows past it.",
        [
            target(
                f"{PREFIX}max_running_requests{{{SEL}}}",
                "{{instance}} {{unit}} max_running_requests",
                "A",
            ),
            target(
                f"{PREFIX}cuda_graph_max_batch_size{{{SEL}}}",
                "{{instance}} {{unit}} largest graph batch",
                "B",
            ),
        ],
        w=12,
        h=8,
        field={"custom": {"lineInterpolation": "stepAfter"}},
    )
    yield panel(
        g,
        "timeseries",
        "Generation throughput (latest batch line)",
        "gen throughput (token/s) of the latest decode batch line, whatever the load.",
        [
            target(
                f"{PREFIX}generation_throughput_tokens_per_second{{{SEL}}}",
                "{{instance}} {{unit}}",
            )
        ],
        w=12,
        h=8,
        unit="tokens/s",
    )
    yield panel(
        g,
        "timeseries",
        "Load: running and queued requests, KV usage",
        "From the latest batch line.",
        [
            target(f"{PREFIX}running_requests{{{SEL}}}", "{{instance}} {{unit}} running", "A"),
            target(f"{PREFIX}queued_requests{{{SEL}}}", "{{instance}} {{unit}} queued", "B"),
        ],
        w=6,
        h=8,
    )
    yield panel(
        g,
        "timeseries",
        "KV token usage",
        "token usage of the latest batch line (0-1).",
        [target(f"{PREFIX}token_usage_ratio{{{SEL}}}", "{{instance}} {{unit}}")],
        w=6,
        h=8,
        unit="percentunit",
    )

    yield g.row("The sentinel itself")
    own = 'job=~"$job", instance=~"$instance"'
    yield panel(
        g,
        "timeseries",
        "Journal: age of the newest entry read, processing lag",
        "A growing age with a running server means the sentinel stopped reading.",
        [
            target(f"{PREFIX}journal_last_entry_age_seconds{{{own}}}", "{{instance}} age", "A"),
            target(f"{PREFIX}processing_lag_seconds{{{own}}}", "{{instance}} lag", "B"),
        ],
        w=12,
        h=7,
        unit="s",
    )
    yield panel(
        g,
        "timeseries",
        "Entries read, rejected reloads, Alertmanager push failures",
        "Per-second rates.",
        [
            target(
                f"rate({PREFIX}journal_entries_read_total{{{own}}}[$__rate_interval])",
                "{{instance}} entries/s",
                "A",
            ),
            target(
                f"increase({PREFIX}rule_load_errors_total{{{own}}}[$__rate_interval])",
                "{{instance}} rejected reloads",
                "B",
            ),
            target(
                f"rate({PREFIX}alertmanager_push_failures_total{{{own}}}[$__rate_interval])",
                "{{instance}} push failures/s",
                "C",
            ),
        ],
        w=12,
        h=7,
    )


def _query_variable(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "query": query,
        "definition": query,
        "refresh": 2,
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "current": {},
        "options": [],
        "sort": 1,
        "hide": 0,
        "regex": "",
    }


def dashboard() -> dict[str, Any]:
    return {
        "title": "SGLang startups (sglang-sentinel)",
        "uid": "sglang-sentinel",
        "description": "Startup facts of SGLang servers against their baselines, from "
        "sglang-sentinel. Generated by `python -m tools.grafana`; do not edit by hand.",
        "tags": ["sglang", "sglang-sentinel"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "time": {"from": "now-7d", "to": "now"},
        "refresh": "1m",
        "timezone": "",
        "links": [],
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Data source",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {},
                    "options": [],
                    "refresh": 1,
                    "hide": 0,
                    "regex": "",
                },
                _query_variable("job", "Job", f"label_values({PREFIX}build_info, job)"),
                _query_variable(
                    "instance",
                    "Instance",
                    f'label_values({PREFIX}build_info{{job=~"$job"}}, instance)',
                ),
                _query_variable(
                    "unit",
                    "Unit",
                    f'label_values({PREFIX}startup_ready{{job=~"$job", instance=~"$instance"}}, unit)',
                ),
            ]
        },
        "annotations": {
            "list": [
                {
                    "name": "Startups",
                    "datasource": DS,
                    "enable": True,
                    "iconColor": "blue",
                    "expr": f"changes({PREFIX}startup_timestamp_seconds{{{SEL}}}[2m]) > 0",
                    "titleFormat": "startup",
                    "textFormat": "{{instance}} {{unit}}",
                    "step": "60s",
                }
            ]
        },
        "panels": list(_panels()),
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"


# -- what the CI check reads ------------------------------------------------------------------------


def queries(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target, annotation and variable (label_values' selector)."""
    out = []
    for p in doc["panels"]:
        for t in p.get("targets", []):
            out.append((f"panel {p['id']} {p['title']!r} {t['refId']}", t["expr"]))
    for a in doc["annotations"]["list"]:
        if "expr" in a:
            out.append((f"annotation {a['name']!r}", a["expr"]))
    for v in doc["templating"]["list"]:
        m = re.fullmatch(r"label_values\((.*), *\w+\)", str(v.get("query", "")))
        if v["type"] == "query" and m:
            out.append((f"variable {v['name']}", m.group(1)))
    return out


def problems(doc: dict[str, Any], committed: str | None, path: Path = DASHBOARD_PATH) -> list[str]:
    """Why the dashboard is not fit to ship: a stale committed file, unknown metric names."""
    found = []
    if committed is not None and committed != render():
        found.append(f"{path} is stale: run `make dashboard` and commit it")
    known = exported_metric_names()
    for where, expr in queries(doc):
        for name in sorted(set(METRIC_NAME.findall(expr)) - known):
            found.append(
                f"{where}: {name} is not exported by the sentinel (sglang_sentinel/daemon/metrics.py)"
            )
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.grafana", description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if the committed JSON is stale")
    parser.add_argument("--output", type=Path, default=DASHBOARD_PATH)
    args = parser.parse_args(argv)
    if args.check:
        committed = args.output.read_text() if args.output.exists() else ""
        found = problems(dashboard(), committed, args.output)
        for p in found:
            print(p, file=sys.stderr)
        return 1 if found else 0
    found = problems(dashboard(), None)
    if found:
        print("\n".join(found), file=sys.stderr)
        return 1
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(render())
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
