"""The status page: one self-contained HTML document a person reads in five seconds.

Served at `/` by the daemon and written by `sentinel report --html FILE` (same renderer). Per unit:
the verdict, the latest startup and its baseline, findings with their evidence, the key facts
against the baseline, and small inline-SVG charts of those facts over the last startups.

Everything shown comes from log lines, which are hostile input: every string goes through
`_e` (the five characters html.escape(quote=True) escapes, the same way). The page has no script, no external asset and a Content-Security-Policy that
forbids loading anything; severity is spelled out and has an icon, colour only repeats it.
server_args are never rendered; findings' evidence is already redacted upstream.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from ..compare import LEDGER_CHECK, VERDICTS, UnitStatus, Verdict, describe
from ..evidence import render_evidence
from ..facts import page_facts
from ..logtemplates import not_kept
from ..model import SEVERITY_ORDER, Comparison, FactValue, Finding, StartupRecord
from .report import compact_evidence, merged_evidence
from .wording import outcome

MAX_EVIDENCE = 10
MAX_TEXT = 300  # longest log-derived string rendered (failure reasons, evidence items)

# Icons and words carry the meaning; colour (a CSS class) only repeats it.
_SEVERITY_ICON = {"critical": "✖", "warning": "⚠", "info": "ℹ"}


@dataclass(frozen=True, slots=True)
class KeyFact:
    """One key fact of the page: its record key, label, unit suffix and the check that guards it."""

    key: str
    label: str
    suffix: str = ""
    check: str | None = None
    chart: bool = False


# The page's key facts, from the registry (facts.py: `page`).
KEY_FACTS: Sequence[KeyFact] = tuple(
    KeyFact(f.name, f.page.label, f" {f.unit}" if f.unit else "", f.page.check, f.page.chart)
    for f in page_facts()
    if f.page is not None
)


# -- page -----------------------------------------------------------------------------------------


def render_page(
    statuses: Sequence[UnitStatus],
    *,
    generated_at: float,
    version: str,
    refresh_seconds: int | None = None,
    metrics_link: bool = False,
) -> str:
    """The whole document; `refresh_seconds` adds a meta refresh (the daemon's live page)."""
    refresh = (
        f'<meta http-equiv="refresh" content="{int(refresh_seconds)}">' if refresh_seconds else ""
    )
    links = ' · <a href="/metrics">metrics</a>' if metrics_link else ""
    body = [
        "<header><h1>sglang-sentinel · startup status</h1>",
        f'<p class="meta">generated {_e(_utc(generated_at))} · sglang-sentinel {_e(version)}'
        f"{links}</p></header>",
    ]
    if not statuses:
        body.append('<p class="empty">No units configured.</p>')
    else:
        body.append(_summary(statuses))
        body.extend(_unit_section(s) for s in statuses)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\';'
        " style-src 'unsafe-inline'; img-src data:\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # An empty icon, so a browser does not ask the server for /favicon.ico.
        '<link rel="icon" href="data:,">'
        f"{refresh}<title>{_e(_title(statuses))}</title><style>{_CSS}</style></head>"
        "<body>" + "\n".join(body) + "</body></html>\n"
    )


def _title(statuses: Sequence[UnitStatus]) -> str:
    worst = max((_verdict(s)[0] for s in statuses), key=VERDICTS.index, default="ok")
    return f"{_VERDICT_TEXT[worst]} · sglang-sentinel"


_VERDICT_TEXT = {
    "none": "no startup yet",
    "ok": "OK",
    "starting": "STARTING",
    "info": "INFO",
    "warning": "WARNING",
    "stalled": "STALLED",
    "failed": "FAILED",
    "critical": "CRITICAL",
}
_VERDICT_ICON = {
    "none": "○",
    "ok": "✔",
    "starting": "…",
    "info": "ℹ",
    "warning": "⚠",
    "stalled": "◷",
    "failed": "✖",
    "critical": "✖",
}


def _verdict(s: UnitStatus) -> tuple[Verdict, str]:
    """(the unit's verdict, compare/status.py's, and a one-line reason)."""
    key = s.verdict
    latest = s.latest
    if latest is None:
        return key, "no startup recorded yet"
    if key == "stalled":
        return key, next(f.message for f in latest.findings if f.check == "startup_stalled")
    if key == "starting":
        which = "first startup" if s.comparison is None else "a new startup"
        return key, f"{which} under way since {_utc(latest.record.started_at)}"
    if key == "failed":
        return key, _clip(latest.record.failure_reason or "the server exited before it was ready")
    findings = _ordered(latest.findings)
    if findings:
        more = f" (+{len(findings) - 1} more)" if len(findings) > 1 else ""
        return key, findings[0].message + more
    if latest.baseline is None:
        return key, "ready; no baseline to compare with yet"
    return key, "no regression against the baseline"


def _stall(s: UnitStatus) -> Finding | None:
    if s.starting is None:
        return None
    return next((f for f in s.starting.findings if f.check == "startup_stalled"), None)


def _summary(statuses: Sequence[UnitStatus]) -> str:
    rows = []
    for s in statuses:
        key, reason = _verdict(s)
        rows.append(
            f'<li class="v-{key}"><a href="#{_anchor(s.unit)}">'
            f'<span class="badge">{_VERDICT_ICON[key]} {_VERDICT_TEXT[key]}</span>'
            f' <span class="unit">{_e(s.unit)}</span></a>'
            f' <span class="reason">{_e(reason)}</span></li>'
        )
    return '<ul class="summary">' + "".join(rows) + "</ul>"


def _unit_section(s: UnitStatus) -> str:
    key, _ = _verdict(s)
    parts = [
        f'<section class="unit-card v-{key}" id="{_anchor(s.unit)}">',
        f'<h2><span class="badge">{_VERDICT_ICON[key]} {_VERDICT_TEXT[key]}</span> '
        f"{_e(s.unit)}</h2>",
    ]
    c = s.comparison
    parts.append(_startup_lines(s))
    if c is not None:
        parts.append(_findings(c))
    parts.append('<div class="facts-row">')
    if c is not None:
        parts.append(_facts_table(c))
    if s.history:
        parts.append(_charts(s))
    parts.append("</div>")
    if c is not None:
        parts.append(_evidence(c))
        parts.append(_log_diff(c))
    parts.append("</section>")
    return "\n".join(parts)


def _startup_lines(s: UnitStatus) -> str:
    rows = []
    c = s.comparison
    if c is not None:
        r = c.record
        rows.append(("Latest startup", _describe(r)))
        model = _model(r)
        if model:
            rows.append(("Server", _e(model)))
        if r.outcome == "failed" and r.failure_reason:
            rows.append(("Failure", f"<code>{_e(_clip(r.failure_reason))}</code>"))
        if c.baseline is not None:
            kind = "pinned" if c.baseline_kind == "pinned" else "previous ready startup"
            rows.append(("Baseline", f"{_describe(c.baseline)} <em>({kind})</em>"))
        else:
            rows.append(
                (
                    "Baseline",
                    "none yet: the first ready startup becomes the comparison point "
                    "(pin one with <code>sentinel baseline --pin</code>)",
                )
            )
    if c is not None and c.decode and c.decode.get("verdict") != "inconclusive":
        rows.append(("Decode", _e(describe(c.decode))))
    if s.starting is not None:
        r = s.starting.record
        stalled = _stall(s)
        state = (
            f'<strong class="sev-{_e(stalled.severity)}">◷ stalled</strong>: {_e(stalled.message)}'
            if stalled is not None
            else "not ready yet"
        )
        rows.append(
            (
                "Under way",
                f"startup <code>{_e(r.invocation_id[:8])}</code> since "
                f"{_e(_utc(r.started_at))}, {state}",
            )
        )
    if not rows:
        rows.append(("Latest startup", "none recorded yet"))
    return (
        '<dl class="startup">'
        + "".join(f"<dt>{label}</dt><dd>{value}</dd>" for label, value in rows)
        + "</dl>"
    )


def _describe(r: StartupRecord) -> str:
    state = outcome(r, loud=lambda word: f"<strong>{word}</strong>")
    return f"<code>{_e(r.invocation_id[:8])}</code> started {_e(_utc(r.started_at))}, {state}"


def _findings(c: Comparison) -> str:
    findings = _ordered(c.findings)
    if not findings:
        text = (
            "No findings: every fact seen matches the baseline."
            if c.baseline is not None
            else "No findings (nothing to compare with yet)."
        )
        return f'<p class="no-findings">✔ {text}</p>'
    rows = "".join(
        f'<tr class="sev-{f.severity}"><td class="sev">'
        f"{_SEVERITY_ICON.get(f.severity, '•')} {_e(f.severity.upper())}</td>"
        f"<td><code>{_e(f.check)}</code></td><td>{_e(f.message)}</td></tr>"
        for f in findings
    )
    return (
        '<h3>Findings</h3><table class="findings"><thead><tr><th>Severity</th><th>Check</th>'
        f"<th>What</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _evidence(c: Comparison) -> str:
    """The compact line a person reads, and every item behind a <details> (no script needed)."""
    # The ledger's lines have their own block (_log_diff).
    evidence = merged_evidence([f for f in _ordered(c.findings) if f.check != LEDGER_CHECK])
    if not evidence:
        return ""
    shown = "".join(
        f"<li>{_e(_clip(render_evidence(item)))}</li>" for item in evidence[:MAX_EVIDENCE]
    )
    more = (
        f"<li><em>and {len(evidence) - MAX_EVIDENCE} more (sentinel diff)</em></li>"
        if len(evidence) > MAX_EVIDENCE
        else ""
    )
    return (
        '<h3>Evidence: what changed</h3><p class="changed">'
        f"{_e(_clip(compact_evidence(evidence), 2 * MAX_TEXT))}</p>"
        f'<details><summary>all {len(evidence)} evidence items</summary><ul class="evidence">'
        f"{shown}{more}</ul></details>"
    )


def _log_diff(c: Comparison) -> str:
    """The downgrade ledger's blocks: downgrade lines new in this startup's log, other new
    lines, and the baseline's lines gone (information: a fallback that went away), each with
    its example."""
    diff = c.log_diff
    if not diff or not (diff["new"] or diff["gone"]):
        return ""
    parts = []
    version = diff.get("version_changed")
    if version:
        parts.append(f'<p class="log-version">{_e(_clip(str(version)))}</p>')
    new = [line for line in diff["new"] if line.get("kind") != "other"]
    other = [line for line in diff["new"] if line.get("kind") == "other"]
    # Gone downgrade lines before gone other ones: the fallbacks that went away first.
    gone = sorted(diff["gone"], key=lambda line: line.get("kind") == "other")
    for title, lines, css in (
        ("New in this startup's log", new, "log-new"),
        ("Other lines new in this startup's log (information)", other, "log-other"),
        ("Gone since the baseline (information)", gone, "log-gone"),
    ):
        if not lines:
            continue
        rows = "".join(
            f"<li><code>{_e(_clip(str(line['example'])))}</code> "
            f"<em>({'other, ' if css == 'log-gone' and line.get('kind') == 'other' else ''}"
            f"{int(line['ranks'])} rank{'s' if line['ranks'] != 1 else ''})</em></li>"
            for line in lines[:MAX_EVIDENCE]
        )
        if len(lines) > MAX_EVIDENCE:
            rows += f"<li><em>and {len(lines) - MAX_EVIDENCE} more (sentinel diff --log)</em></li>"
        if css == "log-new" and diff.get("dropped"):
            rows += f"<li><em>{_e(not_kept(int(diff['dropped'])))}</em></li>"
        parts.append(f'<h3>{title}</h3><ul class="{css}">{rows}</ul>')
    return "".join(parts)


def _facts_table(c: Comparison) -> str:
    flagged = {f.check: f.severity for f in c.findings}
    rows = []
    for fact in KEY_FACTS:
        now = c.record.facts.get(fact.key)
        base = c.baseline.facts.get(fact.key) if c.baseline is not None else None
        if now is None and base is None:
            continue
        severity = flagged.get(fact.check or "")
        mark = (
            f'<span class="sev-{severity}">{_SEVERITY_ICON[severity]} {severity}</span>'
            if severity
            else ""
        )
        rows.append(
            f"<tr{f' class=sev-{severity}' if severity else ''}><th>{_e(fact.label)}</th>"
            f"<td>{_e(_show(base, fact.suffix))}</td><td>{_e(_show(now, fact.suffix))}</td>"
            f"<td>{_e(_change(base, now))}</td><td>{mark}</td></tr>"
        )
    if not rows:
        return ""
    return (
        '<div><h3>Key facts</h3><table class="facts"><thead><tr><th>fact</th><th>baseline</th>'
        "<th>latest</th><th>change</th><th></th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></div>"
    )


# -- charts -----------------------------------------------------------------------------------------

_W, _H = 270, 116
_PAD_L, _PAD_R, _PAD_T, _PAD_B = 8, 8, 30, 22


def _charts(s: UnitStatus) -> str:
    baseline = s.comparison.baseline if s.comparison is not None else None
    flagged = {f.check: f.severity for f in s.comparison.findings} if s.comparison else {}
    charts = [
        _chart(fact, s.history, baseline, flagged.get(fact.check or ""))
        for fact in KEY_FACTS
        if fact.chart
    ]
    n = len(s.history)
    return (
        f"<div><h3>Last {n} startup{'s' if n != 1 else ''}</h3>"
        '<div class="charts">' + "".join(c for c in charts if c) + "</div>"
        '<p class="legend">● ready · ✕ failed · ○ starting · - - - baseline ·'
        " newest on the right</p></div>"
    )


def _chart(
    fact: KeyFact,
    history: Sequence[StartupRecord],
    baseline: StartupRecord | None,
    severity: str | None,
) -> str:
    values = [_num(r.facts.get(fact.key)) for r in history]
    base = _num(baseline.facts.get(fact.key)) if baseline is not None else None
    known = [v for v in values if v is not None] + ([base] if base is not None else [])
    if not known:
        return ""
    top = max(known) * 1.15 or 1.0
    plot_w, plot_h = _W - _PAD_L - _PAD_R, _H - _PAD_T - _PAD_B
    n = len(history)

    def x(i: int) -> float:
        return _PAD_L + (plot_w / 2 if n == 1 else plot_w * i / (n - 1))

    def y(v: float) -> float:
        return _PAD_T + plot_h * (1 - v / top)

    # The headline value is the latest decided startup's: one under way has no facts yet.
    decided = [v for v, r in zip(values, history, strict=True) if r.outcome != "starting"]
    latest = decided[-1] if decided else None
    head = _show(latest, fact.suffix) if latest is not None else "not seen"
    if severity:
        head = f"{_SEVERITY_ICON[severity]} {head}"
    if base is not None:
        head += f" · baseline {_show(base, fact.suffix)}"
    label = f"{fact.label} over the last {n} startups: " + ", ".join(
        _show(v, "") if v is not None else r.outcome for v, r in zip(values, history, strict=True)
    )
    if base is not None:
        label += f"; baseline {_show(base, '')}"
    out = [
        f'<svg class="chart" role="img" aria-label="{_e(label)}" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}"><title>{_e(label)}</title>',
        f'<text class="c-title" x="{_PAD_L}" y="13">{_e(fact.label)}</text>',
        f'<text class="c-value" x="{_PAD_L}" y="25">{_e(head)}</text>',
        f'<line class="axis" x1="{_PAD_L}" y1="{y(0):.1f}" x2="{_W - _PAD_R}" y2="{y(0):.1f}"/>',
    ]
    if base is not None:
        out.append(
            f'<line class="base" x1="{_PAD_L}" y1="{y(base):.1f}" x2="{_W - _PAD_R}" '
            f'y2="{y(base):.1f}"/>'
        )
    points = [(x(i), y(v)) for i, v in enumerate(values) if v is not None]
    if len(points) > 1:
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
        out.append(f'<polyline class="line" points="{path}"/>')
    for i, (v, r) in enumerate(zip(values, history, strict=True)):
        tip = f"{r.invocation_id[:8]} {_utc(r.started_at)} {r.outcome}: " + (
            _show(v, fact.suffix) if v is not None else "not seen"
        )
        last = (" last" + (f" flag-{severity}" if severity else "")) if i == n - 1 else ""
        if r.outcome == "starting" and v is None:
            out.append(
                f'<circle class="pt-starting{last}" cx="{x(i):.1f}" cy="{y(0) - 6:.1f}" r="4">'
                f"<title>{_e(tip)}</title></circle>"
            )
        elif r.outcome == "failed":
            cx, cy = x(i), y(0) - 6
            out.append(
                f'<g class="pt-failed{last}"><title>{_e(tip)}</title>'
                f'<path d="M{cx - 4:.1f},{cy - 4:.1f}L{cx + 4:.1f},{cy + 4:.1f}'
                f'M{cx - 4:.1f},{cy + 4:.1f}L{cx + 4:.1f},{cy - 4:.1f}"/></g>'
            )
        elif v is not None:  # a ready startup that did not log this fact has no point
            cls = "pt-starting" if r.outcome == "starting" else "pt"
            out.append(
                f'<circle class="{cls}{last}" cx="{x(i):.1f}" cy="{y(v):.1f}" r="{4 if last else 3}">'
                f"<title>{_e(tip)}</title></circle>"
            )
    first, final = history[0], history[-1]
    out.append(
        f'<text class="c-axis" x="{_PAD_L}" y="{_H - 6}">{_e(_day(first.started_at))}</text>'
    )
    if n > 1:
        out.append(
            f'<text class="c-axis" x="{_W - _PAD_R}" y="{_H - 6}" text-anchor="end">'
            f"{_e(_day(final.started_at))}</text>"
        )
    out.append("</svg>")
    return "".join(out)


# -- small helpers ----------------------------------------------------------------------------------


# html.escape(text, quote=True) as a table: one pass, so "&" is never escaped twice; written out
# so the command line, which loads this module through outputs/, does not import html (and its
# entity table) for text it never renders.
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;"})


def _e(text: str) -> str:
    return text.translate(_ESCAPES)


def _clip(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _anchor(unit: str) -> str:
    return "u-" + "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in unit)


def _ordered(findings: Sequence[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: -SEVERITY_ORDER.get(f.severity, 0))


def _utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _day(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%m-%d %H:%M")


def _model(r: StartupRecord) -> str:
    f = r.facts
    path = f.get("model_path")
    parts = []
    if isinstance(path, str) and path:
        parts.append(path.rstrip("/").rsplit("/", 1)[-1])
    for key, label in (("tp_size", "TP"), ("dp_size", "DP"), ("attention_backend", "attention")):
        value = f.get(key)
        if value is not None and not (key == "dp_size" and value == 1):
            parts.append(f"{label} {value}")
    return " · ".join(parts)


def _num(value: FactValue) -> float | None:
    if value is None or isinstance(value, str):
        return None
    if isinstance(value, tuple):
        return float(len(value))
    return float(value)


def _show(value: FactValue | float, suffix: str) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return str(len(value))
    if isinstance(value, float):
        text = f"{value:,.0f}" if value.is_integer() and not suffix else f"{value:,.2f}"
        if suffix == " s":
            text = f"{value:,.0f}"
        return text + suffix
    if isinstance(value, int):
        return f"{value:,}{suffix}"
    return _clip(str(value)) + suffix


def _change(base: FactValue, now: FactValue) -> str:
    if base is None or now is None or base == now:
        return "same" if base == now else "—"
    if isinstance(base, bool) or isinstance(now, bool):
        return f"{_show(base, '')} → {_show(now, '')}"
    b, n = _num(base), _num(now)
    if b is None or n is None:
        return "changed"
    if b == 0:
        return f"{n - b:+,.0f}"
    pct = (n - b) / abs(b) * 100
    return f"{pct:+.0f} %".replace("-", "−")


_CSS = """
:root{--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--bg:#fff;--card:#f6f8fa;
--crit:#b3261e;--warn:#8a5a00;--info:#0b5cad;--ok:#1a7f37}
*{box-sizing:border-box}
body{margin:0;padding:20px 28px;font:15px/1.45 "DejaVu Sans",system-ui,sans-serif;color:var(--fg);
background:var(--bg)}
header{display:flex;align-items:baseline;justify-content:space-between;gap:16px;flex-wrap:wrap}
h1{font-size:20px;margin:0 0 10px}
.meta{color:var(--muted);font-size:13px;margin:0}
a{color:inherit}
code{font:13px "DejaVu Sans Mono",monospace}
.summary{list-style:none;padding:0;margin:0 0 18px}
.summary li{padding:8px 12px;border:1px solid var(--line);border-left-width:6px;margin:4px 0;
background:var(--card)}
.summary a{text-decoration:none}
.summary .unit{font-weight:bold}
.badge{display:inline-block;font-weight:bold;padding:1px 8px;border-radius:3px;color:#fff;
background:var(--muted);letter-spacing:.02em}
.v-critical .badge,.v-failed .badge{background:var(--crit)}
.v-warning .badge,.v-stalled .badge{background:var(--warn)}
.v-info .badge{background:var(--info)}
.v-ok .badge{background:var(--ok)}
.v-critical,.v-failed{border-left-color:var(--crit)!important}
.v-warning,.v-stalled{border-left-color:var(--warn)!important}
.v-ok{border-left-color:var(--ok)!important}
.unit-card{border:1px solid var(--line);border-left:6px solid var(--line);padding:4px 18px 14px;
margin:0 0 20px}
h2{font-size:18px;margin:12px 0 8px}
h3{font-size:14px;margin:14px 0 6px;text-transform:uppercase;letter-spacing:.05em;
color:var(--muted)}
dl.startup{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:0}
dl.startup dt{color:var(--muted)}
dl.startup dd{margin:0}
table{border-collapse:collapse}
th,td{text-align:left;padding:3px 10px 3px 0;vertical-align:top}
thead th{font-size:12px;color:var(--muted);font-weight:normal;border-bottom:1px solid var(--line)}
table.findings td.sev{white-space:nowrap;font-weight:bold}
.sev-critical .sev,span.sev-critical{color:var(--crit);font-weight:bold}
.sev-warning .sev,span.sev-warning{color:var(--warn);font-weight:bold}
.sev-info .sev,span.sev-info{color:var(--info)}
table.facts th{font-weight:normal}
table.facts td{font-variant-numeric:tabular-nums;padding-right:22px}
tr.sev-critical td,tr.sev-critical th{background:#fdecea}
tr.sev-warning td,tr.sev-warning th{background:#fff6e0}
ul.evidence{margin:0;padding-left:20px;font-size:13px}
.no-findings{color:var(--ok);font-weight:bold}
.facts-row{display:flex;flex-wrap:wrap;gap:28px;align-items:flex-start}
.charts{display:grid;grid-template-columns:repeat(2,auto);gap:8px}
.changed{margin:0 0 4px}
details summary{font-size:13px;color:var(--muted);cursor:pointer}
svg.chart{border:1px solid var(--line);background:#fff}
.c-title{font-size:12px;fill:var(--muted)}
.c-value{font-size:13px;font-weight:bold;fill:var(--fg)}
.c-axis{font-size:10px;fill:var(--muted)}
.axis{stroke:var(--line)}
.base{stroke:#57606a;stroke-dasharray:5 4}
.line{fill:none;stroke:#1b1f24;stroke-width:1.5}
.pt{fill:#1b1f24}
.pt.last{fill:#1b1f24;stroke:#fff;stroke-width:1.5}
.pt-starting{fill:#fff;stroke:#1b1f24;stroke-width:1.5}
.pt-failed path{stroke:var(--crit);stroke-width:2.5}
.pt.flag-critical{fill:var(--crit)}
.pt.flag-warning{fill:var(--warn)}
.legend{font-size:12px;color:var(--muted);margin:4px 0 0}
.empty{color:var(--muted)}
"""
