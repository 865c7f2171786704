"""Rules: YAML rule files -> a RuleSet that turns a journal line into RuleMatches.

files.py    load_rules, check_rules   rule files -> RuleSet, every problem named as file:rule_id
ruleset.py  RuleSet                   a line -> [RuleMatch]; the batch-line fast path
matcher.py  Matcher, MemoMatcher      the seam the tracker matches lines through (memoised)
shapes.py   split_prefix, digit_blind  the SGLang line prefix, other tools' wrappers, the regex shapes
regex.py    RuleRegex                 RE2, the engine every rule regex runs on
pack/       the bundled rule pack (package data; the checkout's top-level rules/ links here)
"""

from .files import check_rules, default_policy_path, default_rules_dir, load_rules
from .matcher import Matcher, MemoMatcher
from .ruleset import BatchMatch, RuleSet
from .shapes import LINE_START_RE, split_prefix, strip_wrappers

__all__ = [
    "LINE_START_RE",
    "BatchMatch",
    "Matcher",
    "MemoMatcher",
    "RuleSet",
    "check_rules",
    "default_policy_path",
    "default_rules_dir",
    "load_rules",
    "split_prefix",
    "strip_wrappers",
]
