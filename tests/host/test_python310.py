"""Python 3.10 is the oldest supported interpreter (Ubuntu 22.04): features newer than 3.10 fail
here, on whatever interpreter runs `make test`, before `make test-pythons` runs the suite on 3.10.

The full proof is that run; this catches the usual suspects in seconds, with the file and line.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCES = sorted(
    p
    for d in ("sglang_sentinel", "tests", "bench", "scripts")
    for p in (REPO / d).rglob("*.py")
    if ".venv" not in p.parts
)
# Names that appeared after 3.10, by the module they come from.
NEWER = {
    "datetime": {"UTC"},
    "typing": {"Self", "LiteralString", "Never", "assert_type", "reveal_type", "TypeVarTuple"},
    "enum": {"StrEnum", "verify", "ReprEnum"},
    "asyncio": {"TaskGroup", "timeout"},
    "contextlib": {"chdir"},
}
NEWER_MODULES = {"tomllib", "wsgiref.types"}
# Possessive repeats (`*+`, `{m,n}+`) and atomic groups `(?>...)` are Python 3.11+ regex syntax;
# found by parsing the pattern as `re` does (3.10's parser rejects them outright).
_PARSER = sys.modules["re"].__dict__.get("_parser")
_NEWER_OPCODES = {
    getattr(_PARSER, name) for name in ("POSSESSIVE_REPEAT", "ATOMIC_GROUP") if _PARSER is not None
}
REGEX_CALLS = {"compile", "match", "search", "fullmatch", "sub", "subn", "split", "findall"}


def problems_in(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    where = path.relative_to(REPO)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in NEWER:
            found += [
                f"{where}:{node.lineno}: from {node.module} import {a.name} (Python 3.11+)"
                for a in node.names
                if a.name in NEWER[node.module]
            ]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            found += [
                f"{where}:{node.lineno}: import {n} (Python 3.11+)"
                for n in names
                if n in NEWER_MODULES
            ]
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.attr in NEWER.get(node.value.id, ())
        ):
            found.append(f"{where}:{node.lineno}: {node.value.id}.{node.attr} (Python 3.11+)")
        elif isinstance(node, getattr(ast, "TryStar", ())):
            found.append(f"{where}:{getattr(node, 'lineno', 0)}: except* (Python 3.11+)")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "re"
            and node.func.attr in REGEX_CALLS
            and node.args
        ):
            pattern = _literal(node.args[0])
            if pattern is not None and _newer_regex(pattern):
                found.append(f"{where}:{node.lineno}: possessive/atomic regex (Python 3.11+)")
    return sorted(found, key=lambda line: int(line.split(":")[1]))


def _newer_regex(pattern: str) -> bool:
    if _PARSER is None:  # Python 3.10: such a pattern does not even compile
        try:
            re.compile(pattern)
        except re.error:
            return True
        return False
    try:
        tree = _PARSER.parse(pattern)
    except re.error:
        return False  # not a regex this check can read; the suite exercises it
    return _walk(tree)


def _walk(items: object) -> bool:
    for op, av in items:  # type: ignore[attr-defined]
        if op in _NEWER_OPCODES:
            return True
        for sub in av if isinstance(av, (tuple, list)) else ():
            if isinstance(sub, _PARSER.SubPattern if _PARSER else ()) and _walk(sub):
                return True
            if isinstance(sub, list) and any(
                isinstance(x, _PARSER.SubPattern if _PARSER else ()) and _walk(x) for x in sub
            ):
                return True
    return False


def _literal(node: ast.expr) -> str | None:
    """The text of a string literal (implicitly concatenated ones are one Constant)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
        value = node.value
        return value if isinstance(value, str) else value.decode("latin-1")
    return None


def test_no_python_newer_than_310_in_the_sources() -> None:
    assert len(SOURCES) > 40
    problems = [p for path in SOURCES for p in problems_in(path)]
    assert problems == []


def test_the_check_finds_each_kind() -> None:
    """The checker itself: every construct above is reported (so the test can fail)."""
    sample = REPO / "tests" / "_py311_sample.py"
    text = (
        "import re\nimport tomllib\nfrom datetime import UTC\nfrom typing import Self\n"
        "import enum\nx = enum.StrEnum\nre.compile(r'a*+b')\nre.search(r'(?>ab)c', 'x')\n"
        "re.sub(r'[*+?]', '', 'x')\n"
    )
    expected = [
        "import tomllib",
        "from datetime import UTC",
        "from typing import Self",
        "enum.StrEnum",
        "possessive/atomic regex",
        "possessive/atomic regex",
    ]
    if sys.version_info >= (3, 11):  # 3.10 cannot even parse it
        text += "try:\n    pass\nexcept* ValueError:\n    pass\n"
        expected.append("except*")
    sample.write_text(text)
    try:
        found = problems_in(sample)
    finally:
        sample.unlink()
    assert [line.split(": ", 1)[1].removesuffix(" (Python 3.11+)") for line in found] == expected
