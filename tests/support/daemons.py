"""An in-process Daemon on a journal directory, opened and resumed as `run` does before its
loop: for tests that drive `_drain` or `_loop` themselves, without a subprocess."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sglang_sentinel.config import load_config
from sglang_sentinel.daemon import Daemon


@contextmanager
def opened_daemon(
    journal: Path,
    state: Path,
    units: list[str] | None = None,
    cls: type[Daemon] = Daemon,
) -> Iterator[Daemon]:
    """The daemon of `journal` and `state` (and `units`, else the configured default), its
    source open and its pipeline resumed; closed after."""
    overrides: dict[str, Any] = {"journal.directory": str(journal), "state_dir": str(state)}
    if units is not None:
        overrides["units"] = units
    daemon = cls.from_config(load_config(overrides=overrides, environ={}))
    daemon.source.open()
    try:
        daemon.pipeline.resume(from_boot_start=False)
        yield daemon
    finally:
        daemon.source.close()
        daemon.store.close()
