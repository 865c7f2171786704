"""Startups: journal entries and their rule matches -> one StartupRecord per startup.

tracker.py         StartupTracker  invocation attribution, late lines, split server_args, resumable
decode_samples.py  DecodeState     a startup's clean decode intervals, bounded per bucket
ledger.py          LogLedger       the downgrade ledger: downgrade lines as masked templates;
                   log_diff        new and gone templates against a baseline
"""

from .ledger import (
    MASK_VERSION,
    TEMPLATES_KEPT,
    LogDiff,
    LogLedger,
    LogLine,
    Vocabulary,
    log_diff,
    template_of,
)
from .tracker import CLOSED_KEPT, StartupTracker

__all__ = [
    "CLOSED_KEPT",
    "MASK_VERSION",
    "TEMPLATES_KEPT",
    "LogDiff",
    "LogLedger",
    "LogLine",
    "StartupTracker",
    "Vocabulary",
    "log_diff",
    "template_of",
]
