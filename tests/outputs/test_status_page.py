"""The status page in a real browser: Debian's chromium renders the daemon's `/`.

A real `sentinel run` follows a journal of three units (regressed, OK, failed with a hostile error
line); chromium loads `/` over loopback. The rendered DOM must show the findings with their
severity and evidence, the inline SVG charts, and the hostile text as text; the page must load
nothing (Chromium's net log); the screenshot is kept in build/artifacts/ for CI.
`sentinel report --html` on the same state writes the same page.
"""

from __future__ import annotations

import http.server
import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from html.parser import HTMLParser
from pathlib import Path

import browser
import pagescenario
import pytest
from sentinelproc import Sentinels, cli_stdout, wait_until

pytestmark = pytest.mark.slow

STALL = (
    r"still starting after \d+d\d\dh \(limit 15m00s; the baseline was ready in 55s\):"
    r" neither ready nor failed"
)
VOID = frozenset({"meta", "link", "br", "img", "input", "hr", "circle", "line", "path", "polyline"})


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    content: list[Node | str] = field(default_factory=list)  # child elements and text, in order

    @property
    def children(self) -> list[Node]:
        return [c for c in self.content if isinstance(c, Node)]

    @property
    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text for c in self.content)

    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def find_all(self, tag: str, cls: str | None = None) -> list[Node]:
        out = []
        for child in self.children:
            if child.tag == tag and (cls is None or cls in child.classes()):
                out.append(child)
            out.extend(child.find_all(tag, cls))
        return out


class _Tree(HTMLParser):
    """A small DOM tree from chromium's --dump-dom output (text kept per element, in order)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].content.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].content.append(data)


def parse(dom: str) -> Node:
    tree = _Tree()
    tree.feed(dom)
    return tree.root


def cells(row: Node) -> list[str]:
    return [c.text.strip() for c in row.children if c.tag in ("td", "th")]


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[Sentinels]:
    s = Sentinels(tmp_path)
    yield s
    s.stop_all()


def _unit_args(scenario: pagescenario.Scenario) -> list[str]:
    return [arg for unit in scenario.units for arg in ("--unit", unit)]


def test_status_page_renders_in_chromium(tmp_path: Path, sentinels: Sentinels) -> None:
    """Findings with severity and evidence, SVG charts, hostile text as text, nothing loaded."""
    scenario = pagescenario.build(tmp_path)
    state = tmp_path / "state"
    units = _unit_args(scenario)
    cli_stdout(
        "scan",
        "--journal-dir",
        str(scenario.journal_dir),
        "--state-dir",
        str(state),
        *units,
        timeout=60,
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
    daemon = sentinels.start("--journal-dir", str(scenario.journal_dir), *units, state=state)
    wait_until(
        daemon.scrape_with(f'sglang_sentinel_startup_ready{{unit="{scenario.failed_unit}"}} 0.0'),
        30,
        "the daemon serving the failed unit's startup",
    )
    status, content_type, served = daemon.get("/")
    assert status == 200 and content_type == "text/html; charset=utf-8"

    shown = browser.render(daemon.url("/"))
    root = parse(shown.dom)

    # The script in the log line did not run, and nothing was loaded: no image, no script.
    [title] = root.find_all("head")[0].find_all("title")
    assert title.text == "CRITICAL · sglang-sentinel"
    assert root.find_all("script") == [] and root.find_all("img") == []
    assert shown.page_requests == []
    assert shown.loopback_requests == [daemon.url("/")]

    # Five-second read: one line per unit, worst first in meaning, severity as words.
    # Stalled for months: the elapsed seconds depend on when the test runs.
    stall_message = re.findall(STALL, shown.dom)[0]
    summary = [
        li.text.strip() for li in root.find_all("li") if li.attrs.get("class", "").startswith("v-")
    ]
    assert summary == [
        f"✖ CRITICAL {scenario.seed_unit} max_running_requests 48 → 26 (−46 %) (+3 more)",
        f"✔ OK {scenario.ok_unit} no regression against the baseline",
        f"✖ FAILED {scenario.failed_unit} Scheduler hit an exception: {pagescenario.HOSTILE}",
        f"◷ STALLED {scenario.stalled_unit} {stall_message}",
        summary[4],  # checked below: its numbers are the decode comparison's
    ]
    assert summary[4].startswith(
        f"⚠ WARNING {scenario.decode_unit} decode throughput at like load fell "
    )

    seed, ok, failed, stalled, decoding = root.find_all("section", "unit-card")
    assert [cells(r) for r in seed.find_all("table", "findings")[0].find_all("tr")[1:]] == [
        ["✖ CRITICAL", "max_running_requests_drop", "max_running_requests 48 → 26 (−46 %)"],
        ["⚠ WARNING", "kv_cache_tokens_drop", "KV cache tokens 507050 → 277552 (−45 %)"],
        [
            "⚠ WARNING",
            "piecewise_cuda_graph_disabled",
            "piecewise CUDA graph on → off; disable_piecewise_cuda_graph=True not on the "
            "command line: set by SGLang",
        ],
        [
            "ℹ INFO",
            "new_downgrade_message",
            "1 downgrade message the baseline never printed (the SGLang version changed): "
            "Disable piecewise CUDA graph because --disable-piecewise-cuda-graph is set",
        ],
    ]
    # The downgrade ledger's block: the version change said once (0.5.9 -> 0.5.10rc0), the
    # line new in this startup's log, on its 4 ranks.
    assert seed.find_all("p", "log-version")[0].text.startswith(
        "SGLang version changed (server_args fields: 27 added, 7 removed)"
    )
    assert [li.text for li in seed.find_all("ul", "log-new")[0].find_all("li")] == [
        "Disable piecewise CUDA graph because --disable-piecewise-cuda-graph is set (4 ranks)"
    ]
    evidence = [li.text for li in seed.find_all("ul", "evidence")[0].find_all("li")]
    assert evidence[0] == (
        "flags added: --enable-flashinfer-allreduce-fusion, --enable-fused-moe-sum-all-reduce"
    )
    assert "free GPU memory at load 93.72 → 87.07 GB" in evidence
    dd = [d.text for d in seed.find_all("dd")]
    assert dd[2] == "6a1f0c2e started 2026-03-09 21:31:07 UTC, ready in 3m24s (pinned)"
    facts = {
        cells(r)[0]: cells(r)[1:] for r in seed.find_all("table", "facts")[0].find_all("tr")[1:]
    }
    assert facts["max_running_requests"] == ["48", "26", "−46 %", "✖ critical"]
    assert facts["piecewise CUDA graph"] == ["on", "off", "on → off", "⚠ warning"]

    # The charts: inline SVG, one point per startup, the baseline as a dashed line.
    charts = seed.find_all("svg", "chart")
    assert [c.find_all("text", "c-title")[0].text for c in charts] == [
        "max_running_requests",
        "KV cache tokens",
        "free GPU memory at load",
        "time to ready",
    ]
    assert charts[0].find_all("text", "c-value")[0].text == "✖ 26 · baseline 48"
    assert len(charts[0].find_all("circle")) == 2 and len(charts[0].find_all("line", "base")) == 1
    assert charts[0].attrs["aria-label"] == (
        "max_running_requests over the last 2 startups: 48, 26; baseline 48"
    )
    ok_chart = ok.find_all("svg", "chart")[0]
    assert len(ok_chart.find_all("circle")) == 3 and len(ok_chart.find_all("g", "pt-failed")) == 1
    assert [d.text for d in failed.find_all("dd")][1] == (
        f"Scheduler hit an exception: {pagescenario.HOSTILE}"
    )

    # The startup under way is stalled; its chart shows it as a hollow point.
    assert [d.text for d in stalled.find_all("dd")][2].endswith(f"◷ stalled: {stall_message}")
    assert len(stalled.find_all("svg", "chart")[0].find_all("circle", "pt-starting")) == 1

    # The decode comparison's one line, under the baseline (20 % slower in the scenario).
    [decode_row] = [
        dd.text
        for dt, dd in zip(decoding.find_all("dt"), decoding.find_all("dd"), strict=True)
        if dt.text == "Decode"
    ]
    assert re.fullmatch(
        r"decode at like load \d+ → \d+ tok/s \(−(1[5-9]|2[0-5]) %\), \d+ buckets?, \d+ samples: regressed",
        decode_row,
    ), decode_row
    checks = [cells(r)[1] for r in decoding.find_all("table", "findings")[0].find_all("tr")[1:]]
    assert checks == ["decode_throughput_drop", "decode_without_cuda_graph"]

    # Readers at the same time, each on its own server thread, all get the page (an SQLite
    # connection shared between HTTP threads once turned some of them into server errors).
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda _: daemon.get("/")[0], range(32)))
    assert statuses == [200] * 32

    png = browser.screenshot(daemon.url("/"), "status-page.png")
    print(f"status page screenshot: {png}")

    # `sentinel report --html` writes the same page for a ticket (the header differs: time,
    # refresh and the /metrics link).
    ticket = tmp_path / "ticket.html"
    cli_stdout("report", "--state-dir", str(state), *units, "--html", str(ticket), timeout=30)
    written = ticket.read_text()
    marker = '<ul class="summary">'

    def body(page: str) -> str:  # the stall's elapsed seconds depend on the time of rendering
        tail = page[page.index(marker) :]
        return re.sub(r"still starting after \d+d\d\dh", "still starting after N", tail)

    assert body(written) == body(served)
    assert 'http-equiv="refresh"' in served and 'http-equiv="refresh"' not in written


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def test_request_check_sees_a_page_that_loads_something(tmp_path: Path) -> None:
    """Control for the check above: an <img> on a loopback page shows up as a page request."""
    # The empty icon, as on the status page, so the browser's own favicon fetch stays out.
    (tmp_path / "page.html").write_text(
        '<html><head><link rel="icon" href="data:,"></head>'
        '<body><img src="/probe.png"></body></html>'
    )
    (tmp_path / "probe.png").write_bytes(b"")
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(_Quiet, directory=str(tmp_path))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        shown = browser.render(f"{base}/page.html")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert shown.page_requests == [f"{base}/probe.png"]
