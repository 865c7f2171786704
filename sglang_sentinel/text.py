"""Turning raw journal MESSAGE bytes into one clean line of text, and durations into words."""

from __future__ import annotations

import re

# ANSI CSI sequences (colours, cursor moves) and the two-byte ESC forms tqdm and loggers emit.
_ANSI = re.compile(rb"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|[@-Z\\-_])")


def clean_message(raw: bytes) -> str:
    """Decode a MESSAGE tolerantly: drop ANSI escapes, keep the last update of a CR progress bar."""
    if b"\x1b" in raw:
        raw = _ANSI.sub(b"", raw)
    if b"\r" in raw:
        # tqdm writes every update of a bar separated by CR in one entry; only the final state
        # (the last non-empty segment) is what a terminal would show.
        parts = [p for p in raw.split(b"\r") if p.strip()]
        raw = parts[-1] if parts else b""
    return raw.decode("utf-8", "replace").rstrip("\n")


def duration(seconds: float) -> str:
    """A duration as a person reads it: 42s, 3m07s, 5h02m, 12d04h."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"
