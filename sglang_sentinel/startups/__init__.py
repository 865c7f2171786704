"""Startups: journal entries and their rule matches -> one StartupRecord per startup.

tracker.py         StartupTracker  invocation attribution, late lines, split server_args, resumable
decode_samples.py  DecodeState     a startup's clean decode intervals, bounded per bucket
ledger.py          LogLedger       the downgrade ledger: a startup's window lines as masked
                                   templates, downgrade and other (mask, diff: logtemplates.py)
"""

from .ledger import OTHER_CHARS, OTHER_KEPT, OTHER_LINES, TEMPLATES_KEPT, LogLedger, Vocabulary
from .tracker import CLOSED_KEPT, LIST_KEPT, StartupTracker

__all__ = [
    "CLOSED_KEPT",
    "LIST_KEPT",
    "OTHER_CHARS",
    "OTHER_KEPT",
    "OTHER_LINES",
    "TEMPLATES_KEPT",
    "LogLedger",
    "StartupTracker",
    "Vocabulary",
]
