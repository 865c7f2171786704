"""The status page renderer on its own: escaping, what it never shows, verdicts, charts."""

from __future__ import annotations

import re
from pathlib import Path

from sglang_sentinel.compare import Policy, UnitStatus, unit_status
from sglang_sentinel.evidence import note
from sglang_sentinel.model import Comparison, Finding, StartupRecord
from sglang_sentinel.outputs import render_page
from sglang_sentinel.state import StateStore

HOSTILE = '<script>alert(1)</script><img src="https://203.0.113.9/x"> & "q"'


def record(
    inv: str, started: float, outcome: str = "ready", mrr: int | None = 48, **kw: object
) -> StartupRecord:
    return StartupRecord(
        unit=str(kw.pop("unit", "sglang-a.service")),
        invocation_id=inv * 8,
        started_at=started,
        ready_at=started + 60 if outcome == "ready" else None,
        outcome=outcome,  # type: ignore[arg-type]
        facts={"max_running_requests": mrr, "kv_cache_tokens": 1000, "model_path": "/m/Qwen"},
        **kw,  # type: ignore[arg-type]
    )


def page(*statuses: UnitStatus, refresh: int | None = None) -> str:
    return render_page(
        statuses, generated_at=1_773_000_000.0, version="9.9", refresh_seconds=refresh
    )


def test_log_derived_strings_are_escaped_everywhere() -> None:
    """Unit name, failure reason and evidence come from logs: no tag of theirs survives."""
    base = record("a", 1_773_000_000.0)
    failed = record("b", 1_773_100_000.0, "failed", None, unit=HOSTILE, failure_reason=HOSTILE)
    finding = Finding("startup_failed", "critical", None, None, HOSTILE, evidence=(note(HOSTILE),))
    status = UnitStatus(
        HOSTILE, Comparison(failed, base, "previous", (finding,)), None, (base, failed), False
    )
    html = page(status)
    assert "<script" not in html and "<img" not in html
    assert (
        "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=&quot;https://203.0.113.9/x&quot;&gt; &amp; &quot;q&quot;"
        in html
    )
    assert not re.search(r"\b(src|href)=\"?(https?:)?//", html)


def test_server_args_are_never_rendered() -> None:
    r = record("a", 1_773_000_000.0, server_args={"api_key": "sk-SHOULD-NOT-SHOW", "x": "ARGVAL"})
    html = page(UnitStatus("sglang-a.service", Comparison(r, None, None, ()), None, (r,), False))
    assert "sk-SHOULD-NOT-SHOW" not in html and "ARGVAL" not in html


def test_verdicts_read_without_colour() -> None:
    """Each verdict is a word with an icon; the title names the worst one."""
    ok_base, ok = record("a", 1.0e9), record("b", 1.0e9 + 100)
    starting = record("c", 1.0e9 + 200, "starting", None)
    html = page(
        UnitStatus(
            "u-ok.service", Comparison(ok, ok_base, "pinned", ()), None, (ok_base, ok), True
        ),
        UnitStatus("u-new.service", None, Comparison(starting, None, None, ()), (starting,), False),
        UnitStatus("u-none.service", None, None, (), False),
    )
    assert "<title>STARTING · sglang-sentinel</title>" in html
    assert '<span class="badge">✔ OK</span> <span class="unit">u-ok.service</span>' in html
    assert '<span class="badge">… STARTING</span> <span class="unit">u-new.service</span>' in html
    assert (
        '<span class="badge">○ no startup yet</span> <span class="unit">u-none.service</span>'
        in html
    )
    assert "✔ No findings: every fact seen matches the baseline." in html


def test_chart_has_one_point_per_startup_and_marks_failures() -> None:
    history = (
        record("a", 1.0e9, mrr=48),
        record("b", 1.0e9 + 100, "failed", None),
        record("c", 1.0e9 + 200, mrr=26),
    )
    finding = Finding(
        "max_running_requests_drop", "critical", 48, 26, "max_running_requests 48 → 26"
    )
    status = UnitStatus(
        "u.service", Comparison(history[2], history[0], "pinned", (finding,)), None, history, True
    )
    html = page(status, refresh=30)
    svg = re.search(r'<svg class="chart"[^>]*aria-label="max_running_requests[^"]*".*?</svg>', html)
    assert svg is not None
    chart = svg.group(0)
    assert (
        'aria-label="max_running_requests over the last 3 startups: 48, failed, 26; baseline 48"'
        in chart
    )
    assert chart.count("<circle") == 2 and chart.count('class="pt-failed') == 1
    assert 'class="pt last flag-critical"' in chart
    assert '<meta http-equiv="refresh" content="30">' in html


def test_a_stalled_startup_under_way_is_the_verdict() -> None:
    """startup_stalled (judged at page time) outranks the ready startup before it."""
    ready = record("a", 1.0e9)
    hung = record("b", 1.0e9 + 100, "starting", None)
    stall = Finding(
        "startup_stalled", "warning", 60, 1800.0, "still starting after 1800 s (limit 900 s)"
    )
    html = page(
        UnitStatus(
            "u.service",
            Comparison(ready, None, None, ()),
            Comparison(hung, ready, "previous", (stall,)),
            (ready, hung),
            False,
        )
    )
    assert "<title>STALLED · sglang-sentinel</title>" in html
    assert (
        '<span class="badge">◷ STALLED</span> <span class="unit">u.service</span></a>'
        ' <span class="reason">still starting after 1800 s (limit 900 s)</span>'
    ) in html
    assert '<strong class="sev-warning">◷ stalled</strong>: still starting after 1800 s' in html


def test_history_is_the_last_twelve_startups_read_from_state(tmp_path: Path) -> None:
    """unit_status reads a bounded history (a crash loop leaves thousands of startups)."""
    store = StateStore(tmp_path / "state")
    for i in range(15):
        store.save_startup(record(f"{i:x}", 1.0e9 + 100 * i, mrr=40 + i), None)
    try:
        [status] = unit_status(store, ["sglang-a.service"], Policy(checks={}), now=2.0e9)
    finally:
        store.close()
    assert [r.facts["max_running_requests"] for r in status.history] == list(range(43, 55))
    assert status.comparison is not None
    assert status.comparison.record.invocation_id == "e" * 8
    assert status.comparison.baseline is not None
    assert status.comparison.baseline.invocation_id == "d" * 8
    assert "<h3>Last 12 startups</h3>" in page(status)


def test_new_log_lines_have_their_block_escaped() -> None:
    """The downgrade ledger's lines: new and gone ones each a block with their examples
    (escaped), and the version change said once above them."""
    base, now = record("a", 1_773_000_000.0), record("b", 1_773_100_000.0)
    diff = {
        "new": [
            {"template": "o", "example": "Loaded <it>", "ranks": 2, "kind": "other"},
            {"template": "x", "example": HOSTILE, "ranks": 4, "kind": "downgrade"},
        ],
        "gone": [
            {"template": "z", "example": "other gone", "ranks": 1, "kind": "other"},
            *(
                {"template": f"y{i}", "example": f"old <line> {i}", "ranks": 1, "kind": "downgrade"}
                for i in range(12)
            ),
        ],
        "version_changed": "SGLang version changed (server_args fields: 3 added, 1 removed)",
    }
    c = Comparison(now, base, "pinned", (), log_diff=diff)
    html = page(UnitStatus("sglang-a.service", c, None, (base, now), False))
    assert "<h3>New in this startup's log</h3>" in html
    assert "<script" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<em>(4 ranks)</em>" in html
    assert (
        '<p class="log-version">SGLang version changed (server_args fields: 3 added, 1 '
        "removed)</p><h3>New in this startup's log</h3>"
    ) in html
    gone = html[html.index('<h3>Gone since the baseline (information)</h3><ul class="log-gone">') :]
    gone = gone[: gone.index("</ul>")]
    assert gone.count("<li>") == 11  # ten shown and the rest counted
    assert "<li><code>old &lt;line&gt; 0</code> <em>(1 rank)</em></li>" in gone
    assert "<li><em>and 3 more (sentinel diff --log)</em></li>" in gone
    assert "other gone" not in gone  # downgrade lines first: the other one is past the ten
    # Other new lines are information, in a block of their own after the downgrade ones.
    assert (
        "<h3>Other lines new in this startup's log (information)</h3>"
        '<ul class="log-other"><li><code>Loaded &lt;it&gt;</code> <em>(2 ranks)</em></li></ul>'
        "<h3>Gone since the baseline"
    ) in html
    assert html.index("&lt;script&gt;alert(1)") < html.index("Loaded &lt;it&gt;")
    few = {**diff, "gone": diff["gone"][:2]}
    html = page(
        UnitStatus(
            "sglang-a.service", Comparison(now, base, "pinned", (), log_diff=few), None, (), False
        )
    )
    assert "<li><code>other gone</code> <em>(other, 1 rank)</em></li>" in html
    quiet = Comparison(now, base, "pinned", (), log_diff={"new": [], "gone": []})
    assert "New in this startup" not in page(
        UnitStatus("sglang-a.service", quiet, None, (base, now), False)
    )
