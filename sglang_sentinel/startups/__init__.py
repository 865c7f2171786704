"""Startups: journal entries and their rule matches -> one StartupRecord per startup.

tracker.py         StartupTracker  invocation attribution, late lines, split server_args, resumable
decode_samples.py  DecodeState     a startup's clean decode intervals, bounded per bucket
"""

from .tracker import CLOSED_KEPT, StartupTracker

__all__ = ["CLOSED_KEPT", "StartupTracker"]
