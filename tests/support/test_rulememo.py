"""The run's rule memo (rulememo.py) gives what the real loader gives, and only for the same bytes."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest
from rulememo import RuleMemo, rules_key

from sglang_sentinel import pipeline
from sglang_sentinel.config import Config
from sglang_sentinel.errors import RuleError
from sglang_sentinel.rules import RuleSet, default_rules_dir, load_rules


class Counted:
    """The real load_rules, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, dirs: Sequence[Path]) -> RuleSet:
        self.calls += 1
        return load_rules(dirs)


def pack_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "pack"
    shutil.copytree(default_rules_dir(), copy)
    return copy


def test_the_run_loads_the_pipelines_rules_through_the_memo() -> None:
    assert isinstance(vars(pipeline)["load_rules"], RuleMemo)
    first, _ = pipeline.load_rules_and_policy(Config())
    again, _ = pipeline.load_rules_and_policy(Config())
    assert again is first


def test_the_same_bytes_give_the_real_loaders_rule_set_loaded_once(tmp_path: Path) -> None:
    real = Counted()
    memo = RuleMemo(real)
    dirs = [default_rules_dir(), pack_copy(tmp_path)]
    kept = memo(dirs)
    assert memo(dirs) is kept and memo([*dirs]) is kept
    assert (real.calls, memo.hits) == (1, 2)
    fresh = load_rules(dirs)
    assert kept.rules == fresh.rules and kept.downgrade_words == fresh.downgrade_words
    assert [r.source for r in kept.rules] == [r.source for r in fresh.rules]


def test_changed_bytes_a_new_file_or_another_directory_load_again(tmp_path: Path) -> None:
    real = Counted()
    memo = RuleMemo(real)
    pack = pack_copy(tmp_path)
    before = memo([pack])
    first = sorted(pack.glob("[0-9]*.yaml"))[0]
    first.write_text(first.read_text().replace("description:", "description: changed,", 1))
    changed = memo([pack])
    assert changed is not before and real.calls == 2
    assert changed.rules == load_rules([pack]).rules != before.rules
    (pack / "zz-extra.yaml").write_text("version: 1\nrules: []\n")
    assert memo([pack]) is not changed and real.calls == 3
    assert memo([pack, pack_copy(tmp_path / "other")]) is not changed and real.calls == 4


def test_a_load_that_fails_is_never_kept(tmp_path: Path) -> None:
    real = Counted()
    memo = RuleMemo(real)
    pack = pack_copy(tmp_path)
    good, good_key = memo([pack]), rules_key([pack])
    broken = sorted(pack.glob("[0-9]*.yaml"))[0]
    text = broken.read_text()
    broken.write_text(text + "\nnot_a_key: 1\n")
    for _ in range(2):
        with pytest.raises(RuleError, match="unknown top-level key 'not_a_key'"):
            memo([pack])
    assert real.calls == 3 and memo.kept == {good_key: good}
    broken.write_text(text)
    assert memo([pack]) is good and real.calls == 3


def test_what_the_real_loader_must_judge_always_goes_to_it(tmp_path: Path) -> None:
    """A missing directory, a FIFO named *.yaml, a file past the size limit: no key, no memo."""
    pack = pack_copy(tmp_path)
    assert rules_key([pack]) is not None
    assert rules_key([tmp_path / "missing"]) is None
    fifo = pack / "fifo.yaml"
    os.mkfifo(fifo)
    assert rules_key([pack]) is None
    fifo.unlink()
    (pack / "huge.yaml").write_bytes(b"#" * ((1 << 20) + 1))
    assert rules_key([pack]) is None
    real = Counted()
    memo = RuleMemo(real)
    for _ in range(2):
        with pytest.raises(RuleError):
            memo([pack])
    assert real.calls == 2 and memo.kept == {}
