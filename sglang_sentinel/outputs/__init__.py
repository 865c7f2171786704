"""Outputs: what a person reads, rendered from comparisons and unit statuses (compare/).

report.py  render_report, scan_json  the command line's text and --json (ScanOutput: one at a time)
page.py    render_page               the status page (the daemon's `/`, `sentinel report --html`)
wording.py outcome                   a startup's outcome as both say it
"""

from .page import render_page
from .report import (
    ScanOutput,
    render_diff,
    render_log_diff,
    render_report,
    render_startups,
    scan_json,
    startup_json,
)

__all__ = [
    "ScanOutput",
    "render_diff",
    "render_log_diff",
    "render_page",
    "render_report",
    "render_startups",
    "scan_json",
    "startup_json",
]
