"""The metrics table of docs/architecture.md, generated from the collector: `python -m
tools.metrics_doc [--check]` (`make metrics-doc`; `make check` runs `--check`).

Each family is declared once, where the collector builds it (name, kind, help, labels); this
asks a collector for every family it builds and writes them out, so the table cannot lack a
series the sentinel exports or name one it does not. A build-time tool, like tools/grafana.py.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from prometheus_client.core import Metric

from sglang_sentinel.compare import Policy
from sglang_sentinel.daemon import SentinelCollector
from sglang_sentinel.model import Stats

DOC_PATH = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"
_BEGIN = "<!-- metrics table: generated from the collector by `make metrics-doc` -->"
_END = "<!-- end of metrics table -->"
# The exposition's suffix of a family kind: a counter `x` is `x_total`, an info `x` is `x_info`.
_SUFFIX = {"counter": "_total", "info": "_info"}


def families() -> list[Metric]:
    """Every family a scrape can carry: the series that exist only once a journal entry was read
    (its time and age) are built from stats that say one was."""
    collector = SentinelCollector(
        views=lambda: [],
        stats=Stats(last_entry_realtime=1.0),
        rule_hits=dict,
        policy=lambda: Policy(checks={}),
        baselines_pinned=set,
    )
    return list(collector.collect())


def exposed_name(family: Metric) -> str:
    return family.name + _SUFFIX.get(family.type, "")


def markdown_table() -> str:
    rows = [_BEGIN, "| metric | type | labels | meaning |", "|---|---|---|---|"]
    for f in families():
        labels = ", ".join(getattr(f, "_labelnames", ()))
        rows.append(f"| `{exposed_name(f)}` | {f.type} | {labels} | {f.documentation} |")
    rows.append(_END)
    return "\n".join(rows)


def with_table(doc: str) -> str:
    head, begin, rest = doc.partition(_BEGIN)
    _, end, tail = rest.partition(_END)
    if not begin or not end:
        raise ValueError(f"the metrics table markers are missing: {_BEGIN!r} ... {_END!r}")
    return head + markdown_table() + tail


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.metrics_doc", description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if the table is out of date")
    parser.add_argument("path", nargs="?", type=Path, default=DOC_PATH)
    args = parser.parse_args(argv)
    doc = args.path.read_text(encoding="utf-8")
    new = with_table(doc)
    if args.check:
        if new != doc:
            print(
                f"{args.path}: the metrics table differs from the collector; run `make metrics-doc`",
                file=sys.stderr,
            )
            return 1
        return 0
    if new != doc:
        args.path.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
