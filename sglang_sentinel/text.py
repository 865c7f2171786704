"""Turning raw journal MESSAGE bytes into one clean line of text."""

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
