"""The pipeline's rule loading, memoised on what it reads: the same rule files, byte for byte,
give the RuleSet they gave before (tests/conftest.py installs it for the whole run).

Most tests start a pipeline or run a CLI command in-process, and each loaded the bundled pack
again: YAML, regex compilation and every sample checked, ~60 ms a time, several hundred times a
run. A RuleSet is immutable (frozen rules, compiled RE2 patterns), so handing out the same one
changes nothing a test can see. The key is every input `rules.files` reads: each directory, the
names of its rule files in load order and their bytes. A load that raises is never kept, nor is a
directory that is not one, a file that is not a regular file or one past the size limit: those
go to the real loader every time, which names the problem. tests/rules/ calls `load_rules`
itself and is not served from here; test_rulememo.py checks the memo against the real thing.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

from sglang_sentinel.rules import RuleSet
from sglang_sentinel.rules.files import POLICY_FILE
from sglang_sentinel.yamlfile import MAX_FILE_BYTES

Key = tuple[tuple[str, tuple[tuple[str, bytes], ...]], ...]


def rules_key(dirs: Sequence[Path]) -> Key | None:
    """What loading `dirs` reads, or None when the real loader must see it (a problem)."""
    key = []
    for directory in dirs:
        if not directory.is_dir():
            return None
        files = []
        for path in sorted(directory.glob("*.yaml"), key=lambda p: p.name):
            if path.name == POLICY_FILE:
                continue
            try:
                mode = os.stat(path).st_mode
            except OSError:
                return None
            if not stat.S_ISREG(mode):
                return None
            try:
                data = path.read_bytes()
            except OSError:
                return None
            if len(data) > MAX_FILE_BYTES:
                return None
            files.append((path.name, data))
        key.append((str(directory), tuple(files)))
    return tuple(key)


class RuleMemo:
    """`load_rules` that returns the RuleSet an earlier load of the same bytes gave."""

    def __init__(self, load: Callable[[Sequence[Path]], RuleSet]) -> None:
        self.load = load
        self.kept: dict[Key, RuleSet] = {}
        self.hits = 0

    def __call__(self, dirs: Sequence[Path]) -> RuleSet:
        key = rules_key(dirs)
        if key is None:
            return self.load(dirs)
        found = self.kept.get(key)
        if found is not None:
            self.hits += 1
            return found
        rules = self.load(dirs)  # raises RuleError on a problem: nothing is kept
        if rules_key(dirs) == key:  # not rewritten while it loaded
            self.kept[key] = rules
        return rules
