"""What a CI run could leave on the host: enabled units, TCP listeners, processes.

    python3 scripts/host_footprint.py save FILE      # before: bootstrap, make ci
    python3 scripts/host_footprint.py compare FILE   # after: fails (exit 1) on anything new

Enabled units are the symlinks in /etc/systemd/system/*.wants/ (what starts on the next boot);
Debian's postinst enables prometheus and prometheus-alertmanager that way, and the bootstrap
must undo that for the peers it installs. A new TCP listener or a leftover process counts when
it belongs to this run: its environment carries SENTINEL_FOOTPRINT_RUN (exported by `save`'s
caller, .ci/run, and inherited by everything the run starts) or its command line names this
repository. Standard library only: it runs before the bootstrap.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MARKER = "SENTINEL_FOOTPRINT_RUN"
WANTS = Path("/etc/systemd/system")


def enabled_units() -> list[str]:
    return sorted(
        f"{link.parent.name}/{link.name} -> {os.readlink(link)}"
        for wants in WANTS.glob("*.wants")
        for link in wants.iterdir()
        if link.is_symlink()
    )


def _listening_inodes() -> dict[str, str]:
    """socket inode -> "address:port" of every listening TCP socket."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] != "0A":  # TCP_LISTEN
                continue
            addr, port = fields[1].rsplit(":", 1)
            found[fields[9]] = f"{addr}:{int(port, 16)}"
    return found


def _processes() -> dict[int, tuple[str, bool, set[str]]]:
    """pid -> (command line, belongs to this run, socket inodes it holds)."""
    marker = os.environ.get(MARKER, "")
    out = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (proc / "environ").read_bytes().split(b"\0")
            inodes = set()
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:  # gone meanwhile, or a kernel thread
            continue
        ours = bool(marker) and f"{MARKER}={marker}".encode() in environ
        ours = ours or str(REPO) in cmdline
        out[int(proc.name)] = (cmdline.strip(), ours, inodes)
    return out


def _ancestors() -> set[int]:
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return pids


def snapshot() -> dict[str, list[str]]:
    listening = _listening_inodes()
    procs = _processes()
    mine = _ancestors()
    listeners, leftovers = set(), set()
    for pid, (cmdline, ours, inodes) in procs.items():
        for inode in inodes & listening.keys():
            listeners.add(f"{listening[inode]} {cmdline[:120]}" + (" [this run]" if ours else ""))
        if ours and pid not in mine:
            leftovers.add(f"{pid} {cmdline[:160]}")
    return {
        "enabled": enabled_units(),
        "listeners": sorted(listeners),
        "run_processes": sorted(leftovers),
    }


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in ("save", "compare"):
        print(__doc__, file=sys.stderr)
        return 2
    path = Path(argv[2])
    now = snapshot()
    if argv[1] == "save":
        path.write_text(json.dumps(now, indent=1))
        return 0
    before = json.loads(path.read_text())
    problems = [f"newly enabled unit: {u}" for u in now["enabled"] if u not in before["enabled"]]
    problems += [
        f"new listener of this run: {s}"
        for s in now["listeners"]
        if s.endswith("[this run]") and s not in before["listeners"]
    ]
    problems += [f"process left running by this run: {p}" for p in now["run_processes"]]
    for line in problems:
        print(f"host-footprint: {line}", file=sys.stderr)
    if problems:
        return 1
    print(
        f"host-footprint: nothing new enabled, listening or running"
        f" ({len(now['enabled'])} enabled units, {len(now['listeners'])} listeners as before)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
