"""End-to-end under a real systemd PID 1: `python3 tests/e2e/run.py [bookworm] [trixie]`.

For each Debian suite: mmdebstrap a minbase root, copy this checkout in, boot it with
systemd-nspawn, install as the README says and walk the operator's journey (journey.py).
Roots are built in parallel up front (network- and disk-bound), journeys run one after the other
(their timing bounds should not compete for the 2 cores). Needs root, mmdebstrap and
systemd-nspawn (scripts/e2e.sh installs them). Everything is removed at the end, also on failure
or SIGTERM: the containers are powered off and the roots deleted.

Environment: E2E_WORK (work directory, default a new one under /var/tmp), E2E_CACHE_DIR (keep
the pristine roots as tarballs keyed by suite, packages, mmdebstrap version and UTC day),
E2E_MAKE_TEST (suites, or `all`, whose journey also runs the README's `make test` in the clone).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from journey import CLONE, Journey  # noqa: E402
from machine import Machine, MachineError, add_host_cas, build_root  # noqa: E402
from probes import free_port, report  # noqa: E402

REPO = HERE.parents[1]
SUITES = ("bookworm", "trixie")  # Debian 12, Debian 13


def copy_checkout(root: Path) -> int:
    """This checkout's files (tracked and untracked-but-not-ignored) into ROOT/root/..."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    # Files and symlinks (the top-level rules/ links to the package's pack), as a clone has them.
    files = [
        f
        for f in listed
        if f and ((REPO / f.decode()).is_file() or (REPO / f.decode()).is_symlink())
    ]
    dest = root / CLONE.lstrip("/")
    dest.mkdir(parents=True)
    pack = subprocess.Popen(
        ["tar", "-C", str(REPO), "--null", "-T", "-", "-cf", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    unpack = subprocess.Popen(["tar", "-C", str(dest), "-xf", "-"], stdin=pack.stdout)
    assert pack.stdin is not None and pack.stdout is not None
    pack.stdout.close()
    pack.stdin.write(b"\0".join(files) + b"\0")
    pack.stdin.close()
    if pack.wait() != 0 or unpack.wait() != 0:
        raise MachineError("copying the checkout into the root failed")
    return len(files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suites", nargs="*", default=list(SUITES), choices=SUITES)
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("e2e: needs root (mmdebstrap, systemd-nspawn, nsenter)", file=sys.stderr)
        return 2

    work = Path(
        os.environ.get("E2E_WORK") or tempfile.mkdtemp(prefix="sentinel-e2e.", dir="/var/tmp")
    )
    work.mkdir(parents=True, exist_ok=True)
    cache = Path(os.environ["E2E_CACHE_DIR"]) if os.environ.get("E2E_CACHE_DIR") else None
    run_id = secrets.token_hex(4)
    print(f"e2e: run {run_id}, work directory {work}, suites {' '.join(args.suites)}", flush=True)

    # SIGTERM (CI timeout, Ctrl-C's cousin) unwinds through the finally blocks below.
    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)

    machines = {
        suite: Machine(
            name=suite,
            root=work / f"{suite}-root",
            log=work / f"{suite}.log",
            pid_file=work / f"{suite}.nspawn.pid",
        )
        for suite in args.suites
    }
    build_s: dict[str, float] = {}
    errors: dict[str, BaseException] = {}

    def build(suite: str) -> None:
        start = time.monotonic()
        try:
            build_root(suite, machines[suite].root, machines[suite].log, cache)
            add_host_cas(machines[suite].root)
            copy_checkout(machines[suite].root)
        except BaseException as exc:  # reported below, per suite
            errors[suite] = exc
        build_s[suite] = time.monotonic() - start

    results: dict[str, list[object]] = {}
    failed = False
    total_start = time.monotonic()
    try:
        threads = [threading.Thread(target=build, args=(s,), daemon=True) for s in args.suites]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for suite in args.suites:
            print(f"[{suite}] mmdebstrap root + checkout: {build_s[suite]:.1f} s", flush=True)
        for suite in args.suites:
            machine = machines[suite]
            if suite in errors:
                print(f"[{suite}] root build FAILED: {errors[suite]}", flush=True)
                failed = True
                continue
            journey = Journey(
                machine=machine,
                unit=f"sglang-e2e-{run_id}-{suite}.service",
                port=free_port(),
            )
            try:
                journey.run()
            except Exception as exc:  # any failure ends this suite's journey, reported below
                failed = True
                if not isinstance(exc, (AssertionError, MachineError)):
                    traceback.print_exc()
                print(f"[{suite}] FAILED: {exc}\n[{suite}] log: {machine.log}", flush=True)
                with contextlib.suppress(Exception):  # the sentinel's side, while it is up
                    machine.sh(
                        "systemctl --no-pager status sglang-sentinel; "
                        "journalctl --no-pager -o short-precise -n 40 -u sglang-sentinel",
                        check=False,
                        timeout=30,
                    )
                tail = machine.log.read_text(errors="replace").splitlines()[-80:]
                print("\n".join(f"[{suite}] | {line}" for line in tail), flush=True)
            finally:
                results[suite] = list(journey.steps)
                machine.close()
    finally:
        for machine in machines.values():
            machine.close()
    total = time.monotonic() - total_start
    for suite, steps in results.items():
        print(f"\n{suite} (build {build_s.get(suite, 0):.1f} s):\n{report(steps)}")  # type: ignore[arg-type]
    print(f"\ne2e: {'FAILED' if failed else 'passed'} in {total:.0f} s ({' '.join(args.suites)})")
    if not failed and not os.environ.get("E2E_WORK"):
        subprocess.run(["rm", "-rf", "--one-file-system", str(work)], check=False)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
