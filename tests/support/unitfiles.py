"""systemd unit files in tests: systemd-analyze (skip locally, fail in CI) and a file's directives."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest


def systemd_analyze() -> str:
    """Path to systemd-analyze; skip without it locally, fail without it in CI."""
    path = shutil.which("systemd-analyze")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("systemd-analyze is missing in CI; install the systemd package")
        pytest.skip("systemd-analyze not installed (set CI=1 to make this a failure)")
    return path


def unit_directives(path: Path) -> dict[str, list[str]]:
    """`Key=value` lines of a unit file or drop-in, all values per key in file order."""
    directives: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        directives.setdefault(key.strip(), []).append(value.strip())
    return directives
