"""The metrics tables of README.md and docs/architecture.md, generated from the one declaration
of every family (sglang_sentinel/daemon/families.py): `python -m tools.metrics_doc [--check]`
(`make metrics-doc`; `make check` runs `--check`).

Each family is declared once (name, kind, help, labels, the field it reads) and the collector
builds it from there, so a table cannot lack a series the sentinel exports or name one it does
not. A build-time tool, like tools/grafana.py.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from sglang_sentinel.daemon.families import FAMILIES, Family

REPO = Path(__file__).resolve().parent.parent
README_PATH = REPO / "README.md"
DOC_PATH = REPO / "docs" / "architecture.md"
_BEGIN = "<!-- metrics table: generated from sglang_sentinel/daemon/families.py by `make metrics-doc` -->"
_END = "<!-- end of metrics table -->"


def families() -> tuple[Family, ...]:
    """Every family a scrape can carry, in /metrics order."""
    return FAMILIES


def exposed_name(family: Family) -> str:
    return family.exposed_name


def markdown_table() -> str:
    """docs/architecture.md's table: name, kind, labels and the /metrics help."""
    rows = [_BEGIN, "| metric | type | labels | meaning |", "|---|---|---|---|"]
    for f in FAMILIES:
        rows.append(f"| `{f.exposed_name}` | {f.kind} | {', '.join(f.labels)} | {f.help} |")
    rows.append(_END)
    return "\n".join(rows)


def readme_table() -> str:
    """README.md's table: as the architecture one, plus the field each family reads and notes."""
    rows = [
        _BEGIN,
        "| metric | type | labels | reads | meaning |",
        "|---|---|---|---|---|",
    ]
    for f in FAMILIES:
        meaning = f"{f.help} {f.note}" if f.note else f.help
        labels = ", ".join(f.labels)
        rows.append(f"| `{f.exposed_name}` | {f.kind} | {labels} | `{f.reads}` | {meaning} |")
    rows.append(_END)
    return "\n".join(rows)


def _with(doc: str, begin_marker: str, table: str) -> str:
    head, begin, rest = doc.partition(begin_marker)
    _, end, tail = rest.partition(_END)
    if not begin or not end:
        raise ValueError(f"the metrics table markers are missing: {begin_marker!r} ... {_END!r}")
    return head + table + tail


def with_table(doc: str) -> str:
    """docs/architecture.md's text with its table regenerated."""
    return _with(doc, _BEGIN, markdown_table())


def with_readme_table(doc: str) -> str:
    """README.md's text with its table regenerated."""
    return _with(doc, _BEGIN, readme_table())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.metrics_doc", description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if a table is out of date")
    parser.add_argument("--doc", type=Path, default=DOC_PATH, help="docs/architecture.md")
    parser.add_argument("--readme", type=Path, default=README_PATH, help="README.md")
    args = parser.parse_args(argv)
    stale = 0
    for path, regenerate in ((args.doc, with_table), (args.readme, with_readme_table)):
        doc = path.read_text(encoding="utf-8")
        new = regenerate(doc)
        if new == doc:
            continue
        if args.check:
            print(
                f"{path}: the metrics table differs from sglang_sentinel/daemon/families.py; "
                "run `make metrics-doc`",
                file=sys.stderr,
            )
            stale = 1
        else:
            path.write_text(new, encoding="utf-8")
    return stale


if __name__ == "__main__":
    sys.exit(main())
