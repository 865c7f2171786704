"""What a test run could leave on the host: a snapshot to compare before and after a run.

Live tests run processes "as" a unit: a cgroup under system.slice, PID 1's invocation-id symlink in
/run/systemd/units/, a journald namespace (sockets in /run/systemd/journal.NAME/, files in
/var/log/journal/MACHINE-ID.NAME/). All of it must be named for the test run alone and removed
afterwards; a real service beside the run (e.g. a running `sglang-qwen.service`) must keep its
cgroup and symlink exactly as they were. Only names that could be ours are compared, so services
of the host starting and stopping meanwhile do not count.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import journaltools

# Names a test or benchmark of this project could touch: sglang/sentinel units, journal namespaces
# and journald@ configs, and anything with this run's token in it. Another test run's names (its
# own token, or a pid-named journal namespace) are its business: runs may share a machine.
OURS = re.compile(rf"sglang|sentinel|{re.escape(journaltools.RUN_ID)}")
OTHER_RUN = re.compile(
    r"-st[0-9]+x[0-9a-f]{6}[.-]|sentinel-(?:test|bench)-[0-9]+|sglang-crash-[0-9]+\.service"
)


def _ours(name: str) -> bool:
    if journaltools.RUN_ID in name:
        return True
    return bool(OURS.search(name)) and not OTHER_RUN.search(name)


Snapshot = dict[str, str]


def _entries(directory: Path) -> Snapshot:
    found: Snapshot = {}
    try:
        children = sorted(directory.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return found
    for child in children:
        if not _ours(child.name):
            continue
        if child.is_symlink():
            found[str(child)] = "-> " + os.readlink(child)
        elif child.is_dir():
            found[str(child)] = "dir"
        else:
            found[str(child)] = "file"
    return found


def snapshot() -> Snapshot:
    """The host's sglang/sentinel units, cgroups, invocation links and journal namespaces."""
    found: Snapshot = {}
    found.update(_entries(journaltools.SYSTEMD_UNITS_DIR))
    found.update(_entries(Path("/run/systemd")))
    for base in ("/var/log/journal", "/run/log/journal", "/etc/systemd"):
        found.update(_entries(Path(base)))
    try:
        hierarchies = journaltools.cgroup_hierarchies()
    except journaltools.JournalToolError:
        hierarchies = []
    for hierarchy in hierarchies:
        found.update(_entries(hierarchy / "system.slice"))
    return found


def differences(before: Snapshot, after: Snapshot) -> list[str]:
    """Human-readable differences: what appeared, disappeared or changed."""
    out = []
    for path in sorted(before.keys() | after.keys()):
        was, now = before.get(path), after.get(path)
        if was == now:
            continue
        if was is None:
            out.append(f"left behind: {path} ({now})")
        elif now is None:
            out.append(f"removed: {path} (was {was})")
        else:
            out.append(f"changed: {path}: {was} => {now}")
    return out
