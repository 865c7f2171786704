"""One verdict: `scan`, `check`, `report`, /metrics and the page say the same of every unit.

Over every golden case, and over a state with startups under way: one pending, one stalled,
and a unit whose ready startup is followed by one that stalled (the page and `report` showed
the ready one as healthy while `check` said stalled, and `scan` printed "pending").
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from journaltools import StartupScript, build_journal
from prometheus_client.parser import text_string_to_metric_families
from sentinelproc import scrape_in_process
from test_golden import CASES, _export, _units

from sglang_sentinel.cli import main

READY_LINE = "The server is fired up and ready to roll!"
SEVERITIES = ("info", "warning", "critical")


def _under_way(tmp_path: Path) -> tuple[Path, list[str]]:
    """Four units: pending, stalled, ready then stalled, ready then pending."""
    now = datetime.now(timezone.utc).replace(microsecond=0)
    boot = now - timedelta(hours=3)
    scripts = []

    def startup(unit: str, inv: str, start: datetime, ready: bool) -> None:
        s = StartupScript(unit=unit, start=start, boot_at=boot, invocation_id=inv * 16)
        s.started(start)
        if ready:
            s.line(f"[{start + timedelta(seconds=60):%Y-%m-%d %H:%M:%S}] {READY_LINE}")
        scripts.append(s)

    startup("sglang-pending.service", "1a", now - timedelta(seconds=60), ready=False)
    startup("sglang-stalled.service", "2a", now - timedelta(hours=1), ready=False)
    startup("sglang-restart-stalled.service", "3a", now - timedelta(hours=2), ready=True)
    startup("sglang-restart-stalled.service", "3b", now - timedelta(hours=1), ready=False)
    startup("sglang-restarting.service", "4a", now - timedelta(hours=2), ready=True)
    startup("sglang-restarting.service", "4b", now - timedelta(seconds=30), ready=False)
    journal = tmp_path / "journal"
    for i, s in enumerate(scripts):
        build_journal(s.write(tmp_path / f"{i}.export"), journal, name=f"j{i}")
    return journal, sorted({s.unit for s in scripts})


def _of_json(doc: dict[str, object]) -> dict[str, str]:
    """unit -> verdict of its last startup in a `scan --json` / `check --json` document."""
    out = {}
    for s in doc["startups"]:  # type: ignore[attr-defined]
        severities = [f["severity"] for f in s["findings"]]
        if s["outcome"] == "starting":
            stalled = any(f["check"] == "startup_stalled" for f in s["findings"])
            out[s["unit"]] = "stalled" if stalled else "starting"
        elif s["outcome"] == "failed":
            out[s["unit"]] = "failed"
        else:
            out[s["unit"]] = max(severities, key=SEVERITIES.index, default="ok")
    return out


def _of_report(text: str) -> dict[str, str]:
    """unit -> verdict of the last startup the text report shows for it."""
    out = {}
    for block in text.strip().split("\n\n"):
        head, *lines = block.splitlines()
        unit = head.split()[0]
        severities = [
            word.lower()
            for line in lines
            if (word := line.split()[0]) in ("INFO", "WARNING", "CRITICAL")
        ]
        if "  FAILED" in head:
            out[unit] = "failed"
        elif "starting (not ready yet)" in head:
            out[unit] = "stalled" if severities else "starting"  # its one finding: stalled
        else:
            out[unit] = max(severities, key=SEVERITIES.index, default="ok")
    return out


def _of_page(html: str) -> dict[str, str]:
    found = re.findall(
        r'<li class="v-(\w+)"><a href="#[^"]*"><span class="badge">[^<]*</span>'
        r' <span class="unit">([^<]*)</span>',
        html,
    )
    return {unit: verdict for verdict, unit in found}


def _of_metrics(text: str) -> dict[str, str]:
    series: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            series.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    out = {}
    for labels, value in series["sglang_sentinel_startup_in_progress"].items():
        unit = dict(labels)["unit"]
        firing = [
            (dict(k)["check"], dict(k)["severity"])
            for k, v in series["sglang_sentinel_regression"].items()
            if v == 1 and dict(k)["unit"] == unit
        ]
        ready = series.get("sglang_sentinel_startup_ready", {}).get(labels)
        if value == 1:
            out[unit] = "stalled" if any(c == "startup_stalled" for c, _ in firing) else "starting"
        elif ready is None:
            out[unit] = "none"
        elif ready == 0:
            out[unit] = "failed"
        else:
            out[unit] = max((s for _, s in firing), key=SEVERITIES.index, default="ok")
    return out


def _verdicts(
    journal: Path, units: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> dict[str, dict[str, str]]:
    state = ["--state-dir", str(tmp_path / "state"), *(a for u in units for a in ("--unit", u))]

    def run(*argv: str) -> str:
        main([*argv, *state])
        return capsys.readouterr().out

    scan = json.loads(run("scan", "--journal-dir", str(journal), "--json"))
    return {
        "scan": _of_json(scan),
        "check": _of_json(json.loads(run("check", "--json"))),
        "report": _of_report(run("report")),
        "page": _of_page(run("report", "--html", "-")),
        "metrics": _of_metrics(scrape_in_process(journal, tmp_path / "daemon", units)),
    }


@pytest.mark.parametrize("case", CASES)
def test_every_surface_gives_a_golden_case_the_same_verdict(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = build_journal(_export(case), tmp_path / "journal", case)
    verdicts = _verdicts(journal, _units(_export(case), tmp_path), tmp_path, capsys)
    assert len({json.dumps(v, sort_keys=True) for v in verdicts.values()}) == 1, verdicts


def test_every_surface_gives_startups_under_way_the_same_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal, units = _under_way(tmp_path)
    verdicts = _verdicts(journal, units, tmp_path, capsys)
    expected = {
        "sglang-pending.service": "starting",
        "sglang-restart-stalled.service": "stalled",
        "sglang-restarting.service": "starting",
        "sglang-stalled.service": "stalled",
    }
    assert verdicts == dict.fromkeys(verdicts, expected)
