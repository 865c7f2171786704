"""The one strict loader of the YAML files a person writes: config, rule files, policy files.

Plain YAML silently keeps the last of two equal keys, so a config with `units:` twice watches
only the second list and nobody is told. This loader refuses that, the same way for every file:

- a duplicate key in any mapping is a problem, named by its line and the line of the first one
  (every duplicate in the file is listed, not just the first);
- keys are what YAML makes of them (`1:` is an int, `no:` a bool); a duplicate is judged by the
  loaded key (`1` and `1.0` are the same key), and each file's schema names keys it does not know;
- merge keys (`<<: *defaults`) work as in YAML 1.1: the mapping's own keys override merged ones;
  a duplicate among the mapping's own keys, or inside a merged mapping, is a problem;
- an explicitly tagged scalar that cannot be converted (`!!int abc`) is a problem at its place,
  not a bare Python exception.

libyaml's parser does the work when PyYAML has it (the pure-Python one is most of a short scan's
rule load); when it refuses a document, the pure-Python parser reads it again, for the same
messages and positions on every machine. `load_json` is the same promise for the JSON files the
sentinel reads back (a baseline file).
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import yaml

from .errors import SentinelError

_MERGE_TAG: Final = "tag:yaml.org,2002:merge"

# The largest config, rule, policy or baseline file read (the bundled rule files are under 16 kB).
# Loading is ~1.5 s a MiB of rules on a slow host, on the follow loop at SIGHUP: a 13.6 MB rules
# file held it 21 s, past half of WatchdogSec=30s. RULES_TOTAL_BYTES bounds all rule files.
MAX_FILE_BYTES: Final = 1 << 20
RULES_TOTAL_BYTES: Final = 4 << 20


class FileTooLarge(OSError):
    """A file past MAX_FILE_BYTES, or not a regular file (a FIFO, a device): never read whole.
    The message does not name the file: the caller puts it first, as for any other problem."""


def read_text(path: Path, limit: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes; FileTooLarge otherwise.

    Opened without blocking (a FIFO has no writer) and read no further than `limit` + 1 bytes
    (`/dev/zero` never ends); UnicodeDecodeError and OSError as `Path.read_text` raises them.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FileTooLarge("not a regular file (a FIFO or a device?); give a file")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise FileTooLarge(
            f"larger than {limit // 1024} KiB, the most a config, rule, policy or baseline file"
            " may be; split it (rule files: one concern per file) or trim it"
        )
    return data.decode("utf-8")


@dataclass(frozen=True, order=True, slots=True)
class YamlProblem:
    """One thing wrong with a YAML document, at a 1-based line (and column) when known."""

    line: int | None
    column: int | None
    problem: str  # what is wrong, e.g. "mapping values are not allowed here"
    kind: Literal["syntax", "duplicate"] = "syntax"

    @property
    def where(self) -> str:
        """'line 2, column 10', 'line 3', or '' when the position is unknown."""
        if self.line is None:
            return ""
        return f"line {self.line}" + ("" if self.column is None else f", column {self.column}")

    def __str__(self) -> str:
        text = self.problem if self.kind == "duplicate" else f"invalid YAML: {self.problem}"
        return f"{self.where}: {text}" if self.where else text


class YamlError(SentinelError):
    """A document the strict loader refuses; `problems` lists each one with its position.

    When the only problems are duplicate keys, `document` is what plain YAML would have made of
    the text (the later values kept), so a caller can go on and report its other problems too.
    """

    def __init__(self, problems: list[YamlProblem], document: Any = None) -> None:
        self.problems = problems
        self.document = document
        super().__init__("; ".join(map(str, problems)))


class _Strict:
    """Construction rules shared by the libyaml and the pure-Python loader (a mixin)."""

    duplicates: list[YamlProblem]

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):  # `!!set 0` is not: the base class refuses it
            self._check_unique(node)
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc,no-any-return]

    def _check_unique(self, node: yaml.MappingNode) -> None:
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merged = value_node.value if isinstance(value_node, yaml.SequenceNode) else []
                for source in [value_node, *merged]:
                    if isinstance(source, yaml.MappingNode):
                        self._check_unique(source)
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base class names it
                continue
            if first is None:
                seen[key] = line
            else:
                problem = YamlProblem(
                    line,
                    None,
                    f"duplicate key {key!r} (first on line {first}; the later value would "
                    "silently win)",
                    "duplicate",
                )
                if problem not in self.duplicates:  # an anchored mapping is checked once
                    self.duplicates.append(problem)

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)  # type: ignore[misc]
        except (ValueError, TypeError, AttributeError, ArithmeticError, LookupError) as exc:
            if not isinstance(node, yaml.ScalarNode):
                raise
            # SafeConstructor converts explicitly tagged scalars unchecked: `!!int abc` and
            # `!!timestamp 2001-13-45` raise plain Python errors. Give them the node's place.
            tag = node.tag.rpartition(":")[2]
            why = f" ({exc})" if isinstance(exc, ValueError) else ""
            raise yaml.constructor.ConstructorError(
                None, None, f"{node.value[:60]!r} is not a valid !!{tag}{why}", node.start_mark
            ) from exc


class _PythonLoader(_Strict, yaml.SafeLoader):
    pass


_FAST: Final[type[yaml.SafeLoader]] = (
    type("_LibyamlLoader", (_Strict, yaml.CSafeLoader), {})
    if hasattr(yaml, "CSafeLoader")
    else _PythonLoader
)


def load_yaml(text: str) -> Any:
    """The one document in `text`, strictly loaded; YamlError lists what is wrong and where."""
    if _FAST is not _PythonLoader:
        try:
            return _load(_FAST, text)
        except (yaml.YAMLError, RecursionError):
            pass  # read again below, for the pure-Python parser's message and position
    try:
        return _load(_PythonLoader, text)
    except yaml.YAMLError as exc:
        raise YamlError([_problem(exc, text)]) from exc
    except RecursionError as exc:  # PyYAML's composer recurses once per nesting level
        raise YamlError([YamlProblem(None, None, "nested too deeply")]) from exc


def _load(loader_class: type[yaml.SafeLoader], text: str) -> Any:
    loader = loader_class(text)  # reads the text: rejects control characters up front
    loader.duplicates = []  # type: ignore[attr-defined]
    try:
        data = loader.get_single_data()
    finally:
        loader.dispose()
    if loader.duplicates:  # type: ignore[attr-defined]
        raise YamlError(sorted(loader.duplicates), data)  # type: ignore[attr-defined]
    return data


def _problem(exc: yaml.YAMLError, text: str) -> YamlProblem:
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        return YamlProblem(line, column, f"character #x{exc.character:04x} is not allowed")
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    if context and problem.startswith("but "):  # "expected a single document ... but found ..."
        problem = f"{context} {problem}"
    if mark is None:
        return YamlProblem(None, None, problem)
    return YamlProblem(mark.line + 1, mark.column + 1, problem)


def load_json(text: str) -> Any:
    """JSON with duplicate object keys refused (json.loads keeps the last); ValueError says why."""
    return json.loads(text, object_pairs_hook=_unique_pairs)


class DuplicateKeyError(ValueError):
    """A JSON object with the same key twice."""


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(f"duplicate key {key!r}")
        out[key] = value
    return out


__all__ = ["DuplicateKeyError", "YamlError", "YamlProblem", "load_json", "load_yaml"]
