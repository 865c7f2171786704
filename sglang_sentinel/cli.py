"""The `sentinel` command line; the only place that maps errors to exit codes.

Exit codes: 0 fine, 1 findings of severity warning or worse (`check`) or invalid rules
(`rules check`), 2 usage error / no data / bad config, 3 internal error, 4 pending (`check`: the
latest startup of a unit has no verdict yet, still starting).
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from . import __version__
from .compare import Policy, accepted_patterns, common_evidence, evaluate, unit_status
from .config import Config, config_to_dict, load_config
from .errors import ConfigError, JournalError, NoDataError, RuleError, SentinelError, UsageError
from .evidence import render_evidence
from .logs import Logger, configure_logging, print_error
from .logtemplates import log_diff
from .model import SEVERITY_ORDER, Comparison, StartupRecord
from .outputs import (
    ScanOutput,
    render_diff,
    render_log_diff,
    render_page,
    render_report,
    render_startups,
    scan_json,
    startup_json,
)
from .pipeline import Pipeline, load_rules_and_policy
from .rules import check_rules, default_rules_dir
from .state import DB_NAME, StateStore, broken_database

if TYPE_CHECKING:
    from .sources import Source

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL, EXIT_PENDING = 0, 1, 2, 3, 4
# `check --wait`: how often the state is re-read while the latest startup is still starting.
WAIT_POLL_S = 0.5
STARTUPS_PAGE = 50  # `sentinel startups` shows this many by default (--limit, --before)
log = Logger("sglang_sentinel")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse exits 2 itself; keep the one-line form
        raise UsageError(f"{self.prog}: {message}")


def _common(p: argparse.ArgumentParser, *, units: bool = True) -> None:
    p.add_argument(
        "--state-dir",
        help="state directory (default: $SENTINEL_STATE_DIR, config, /var/lib/sglang-sentinel)",
    )
    p.add_argument(
        "--config", type=Path, help="config file (default /etc/sglang-sentinel/config.yaml)"
    )
    if units:
        p.add_argument(
            "--unit",
            action="append",
            dest="units",
            metavar="UNIT",
            help="unit to look at (docker:NAME for a container, k8s:NS/WORKLOAD[/CONTAINER] "
            "for pods); repeatable (default: the configured units, containers and pods)",
        )
        p.add_argument(
            "--container",
            action="append",
            dest="containers",
            metavar="NAME",
            help="Docker container to look at, by name (json-file or journald log driver); "
            "repeatable",
        )
        p.add_argument(
            "--pod",
            action="append",
            dest="pods",
            metavar="NS/WORKLOAD[/CONTAINER]",
            help="Kubernetes pods to look at, by namespace and workload; repeatable",
        )
        p.add_argument(
            "--docker-root", type=Path, help="Docker's root directory (default /var/lib/docker)"
        )
        p.add_argument(
            "--pod-logs", type=Path, help="the kubelet's pod log directory (default /var/log/pods)"
        )


class _Version(argparse.Action):
    """`--version`: the version, the journal and file readers this install runs (C or Python:
    pip leaves an optional C reader out, quietly, where it cannot build it) and whether its hot
    path runs compiled (mypyc) or pure."""

    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kw: object) -> None:
        from .compiled import hot_path  # both load the modules they name: only when asked
        from .sources import file_reader_path, reader_path

        print(
            f"sglang-sentinel {__version__} (journal reader: {reader_path()}, "
            f"file reader: {file_reader_path()}, hot path: {hot_path()})"
        )
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="sentinel", description="Watch SGLang startups in the systemd journal.")
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("scan", help="one pass over journal history: record startups and report")
    _common(p)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--journal-dir", type=Path, help="read this journal directory")
    src.add_argument(
        "--journal-file",
        type=Path,
        action="append",
        dest="journal_files",
        help="read these journal files (repeatable)",
    )
    p.add_argument(
        "--since",
        help="start at this time: 'YYYY-mm-dd [HH:MM[:SS]]', '-2h', '-30m', '-1d', 'today'",
    )
    p.add_argument("--json", action="store_true", help="print the JSON document only")

    p = sub.add_parser("startups", help="list recorded startups")
    _common(p)
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--limit",
        type=_count,
        default=STARTUPS_PAGE,
        metavar="N",
        help=f"the newest N startups (default {STARTUPS_PAGE}; 0 = all)",
    )
    p.add_argument(
        "--before",
        metavar="STARTUP",
        help="only startups recorded before STARTUP (invocation-id prefix): the next page",
    )

    p = sub.add_parser("baseline", help="show, pin or unpin the baseline startup")
    _common(p)
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--pin",
        nargs="?",
        const="latest-ready",
        metavar="STARTUP",
        help="pin STARTUP (invocation-id prefix or 'latest'; default the latest ready startup)",
    )
    g.add_argument("--unpin", action="store_true")
    g.add_argument(
        "--export",
        type=Path,
        metavar="FILE",
        help="write the unit's pinned baseline to FILE (JSON, content-hashed, no secrets)",
    )
    g.add_argument(
        "--import",
        type=Path,
        dest="import_file",
        metavar="FILE",
        help="pin the baseline in FILE for the unit; refused if model, TP size or GPU differ",
    )
    p.add_argument(
        "--force", action="store_true", help="with --import: import despite the differences"
    )
    p.add_argument("--json", action="store_true")

    p = sub.add_parser(
        "diff", help="what changed between two startups (default: baseline vs latest)"
    )
    _common(p)
    p.add_argument("a", nargs="?", metavar="A")
    p.add_argument("b", nargs="?", metavar="B")
    p.add_argument(
        "--log",
        action="store_true",
        help="the downgrade ledger: downgrade messages new in B and gone since A, with examples",
    )
    p.add_argument("--json", action="store_true")

    p = sub.add_parser(
        "check",
        help="deploy gate: exit 1 if the latest startup regressed, 4 if it is still starting",
    )
    _common(p)
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--wait",
        type=_seconds,
        default=0.0,
        metavar="SECONDS",
        help="wait up to SECONDS for a startup still starting to become ready or fail",
    )

    p = sub.add_parser(
        "report", help="the latest startup of each unit against its baseline (text or HTML page)"
    )
    _common(p)
    p.add_argument(
        "--html",
        metavar="FILE",
        help="write the status page (the daemon's / page) to FILE for a ticket; '-' for stdout",
    )

    p = sub.add_parser("rules", help="rule file tools")
    rsub = p.add_subparsers(dest="rules_command", required=True, parser_class=_Parser)
    rc = rsub.add_parser("check", help="validate rule files (schema, regexes, samples)")
    rc.add_argument("dirs", nargs="*", type=Path, metavar="DIR")

    p = sub.add_parser("run", help="follow the journal, serve metrics, raise alerts")
    _common(p, units=True)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--journal-dir", type=Path)
    src.add_argument("--journal-file", type=Path, action="append", dest="journal_files")
    p.add_argument(
        "--listen", metavar="HOST:PORT", help="metrics address (default 127.0.0.1:19110)"
    )

    p = sub.add_parser("config", help="print the effective configuration (secrets masked)")
    _common(p, units=False)
    return parser


# -- shared setup --------------------------------------------------------------------------------


def _load(args: argparse.Namespace) -> Config:
    overrides: dict[str, Any] = {}
    if getattr(args, "state_dir", None):
        overrides["state_dir"] = args.state_dir
    # --unit, --container and --pod together replace the configured selection (a k8s: unit
    # is a pod selector).
    units = list(getattr(args, "units", None) or [])
    pods = list(getattr(args, "pods", None) or [])
    if units or getattr(args, "containers", None) or pods:
        overrides["units"] = [u for u in units if not u.startswith("k8s:")]
        overrides["containers"] = list(args.containers or [])
        overrides["kubernetes.pods"] = pods + [u for u in units if u.startswith("k8s:")]
    if getattr(args, "docker_root", None):
        overrides["docker_root"] = str(args.docker_root)
    if getattr(args, "pod_logs", None):
        overrides["kubernetes.pod_logs"] = str(args.pod_logs)
    if getattr(args, "journal_dir", None):
        overrides["journal.directory"] = str(args.journal_dir)
    if getattr(args, "journal_files", None):
        overrides["journal.files"] = [str(f) for f in args.journal_files]
    if getattr(args, "listen", None):
        overrides["listen"] = args.listen
    return load_config(args.config, required=args.config is not None, overrides=overrides)


def _policy(config: Config) -> Policy:
    return load_rules_and_policy(config)[1]


def _source(config: Config) -> Source:
    from .pipeline import build_source  # systemd.journal and its readers: only scan and run read

    return build_source(config)


def _emit_json(doc: Any) -> None:
    # allow_nan=False: the contract is strict JSON; a NaN reaching here is a bug, not output.
    sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n")


_REL = re.compile(r"^-?([0-9]{1,12})\s*([smhd])(?:\s+ago)?$")


def parse_since(text: str, now: float | None = None) -> float:
    """'-2h', '30m ago', 'today', 'yesterday', 'YYYY-mm-dd [HH:MM[:SS]]' -> unix seconds."""
    now = time.time() if now is None else now
    t = text.strip().lower()
    m = _REL.match(t)
    if m:
        ts = now - int(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
        if ts < 0:
            raise UsageError(f"--since {text!r} reaches before 1970-01-01; give a shorter span")
        return ts
    if t in ("today", "yesterday"):
        midnight = datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0)
        return midnight.timestamp() - (86400 if t == "yesterday" else 0)
    for fmt in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d", "%Y-%m-%dT%H:%M:%S"):
        try:
            when = datetime.strptime(text.strip(), fmt)
        except ValueError:
            continue
        try:
            ts = when.timestamp()
        except (OverflowError, OSError, ValueError):
            ts = -1.0
        if ts < 0:
            # The journal has nothing before 1970; seeking there would silently find nothing.
            raise UsageError(f"--since {text!r} is before 1970-01-01; the journal starts later")
        return ts
    raise UsageError(
        f"--since {text!r}: use 'YYYY-mm-dd [HH:MM[:SS]]', '-2h', '-30m', '-1d' or 'today'"
    )


# -- commands ------------------------------------------------------------------------------------


# Entries a scan reads between two looks at what it holds (see cmd_scan).
SCAN_CHUNK = 50_000
# Ended startups a scan holds in memory before it commits them and lets them go.
SCAN_ENDED_HELD = 32


def _stored_only(store: StateStore, record: StartupRecord, policy: Policy) -> Comparison:
    """The scan's commit-time "comparison": none (each startup is compared at the end)."""
    return Comparison(record=record, baseline=None, baseline_kind=None, findings=())


def cmd_scan(args: argparse.Namespace) -> int:
    since = parse_since(args.since) if args.since else None  # a bad --since before any work
    config = _load(args)
    rules, policy = load_rules_and_policy(config)
    source = _source(config)
    source.open(follow=False)  # one pass: no inotify watch
    store = StateStore(config.state_dir)
    # A scan keeps no cursor and no resume state: it never resumes, and a daemon sharing the
    # state must not find its own position moved or its open startups closed by it. Every
    # startup is compared once, after the whole pass, with its final baseline; the commits only
    # store.
    pipeline = Pipeline(
        source,
        rules,
        policy,
        store,
        source_key=None,
        startups_kept=config.startups_kept_per_unit,
        evaluator=_stored_only,
    )
    if since is not None:
        source.seek_realtime(since)
    else:
        source.seek_head()
    seen: dict[str, None] = {}
    while True:
        n = pipeline.process(limit=SCAN_CHUNK, read_ahead=True)
        # A scan resumes from nothing, so it commits only to let ended startups go (memory
        # stays flat however long the journal); which late lines are dropped does not depend
        # on when it commits (StartupTracker._builder closes a startup two back at once).
        # The last commit takes a split server_args line as it is: no continuation will come.
        if n == 0 or pipeline.tracker.ended_held >= SCAN_ENDED_HELD:
            for c in pipeline.commit(final=n == 0):
                seen[c.record.invocation_id] = None
        if n == 0:
            break
    source.close()
    entries_read = pipeline.stats.entries_read
    del pipeline  # its tracker's builders (decode samples and all) are stored: let them go
    # Re-evaluate after the whole pass so every startup is compared with its final baseline;
    # one still starting is judged now, as `check` and the page judge it (it may have stalled).
    # Each comparison is rendered and let go at once (it holds two startups' records): the
    # scan's memory does not grow with the number of startups it reports.
    out = ScanOutput(as_json=args.json)
    compared = 0
    now = time.time()
    for inv in seen:
        record = store.startup(inv)
        if record is not None:
            out.add(evaluate(store, record, policy, now=now))
            compared += 1
    store.close()  # a writer's close leaves no -wal/-shm for the readers after it (state.py)
    log.info("scan_finished", entries=entries_read, startups=compared)
    if args.json:
        _emit_json(out.json())
    else:
        print(out.text())
    return EXIT_OK


def cmd_startups(args: argparse.Namespace) -> int:
    config = _load(args)
    store = StateStore(config.state_dir, readonly=True)
    before = store.find_startup(args.before, config.targets) if args.before else None
    # One page, newest last: reading and comparing the whole history would take minutes.
    records = store.startups(
        config.targets,
        limit=args.limit or None,
        before=before.invocation_id if before else None,
    )
    older = bool(records) and bool(
        args.limit and store.startups(config.targets, limit=1, before=records[0].invocation_id)
    )
    next_before = records[0].invocation_id if older else None
    baselines = {u: i for u, (i, _) in store.baselines().items()}
    if args.json:
        policy = _policy(config)
        _emit_json(
            {
                "startups": [startup_json(evaluate(store, r, policy)) for r in records],
                "next_before": next_before,
            }
        )
    else:
        print(render_startups(records, baselines))
        if next_before is not None:
            print(f"(older startups: sentinel startups --before {next_before[:12]})")
    return EXIT_OK


def cmd_baseline(args: argparse.Namespace) -> int:
    config = _load(args)
    if args.force and args.import_file is None:
        raise UsageError("--force goes with --import")
    writes = args.pin is not None or args.unpin or args.import_file is not None
    store = StateStore(config.state_dir, readonly=not writes)
    units = list(config.targets)
    if (writes or args.export is not None) and len(units) != 1:
        raise UsageError("name one unit with --unit (or --container) for this baseline action")
    if args.export is not None:
        return _baseline_export(store, units[0], args.export, config.gpu or "")
    if args.import_file is not None:
        return _baseline_import(store, units[0], args.import_file, config.gpu or "", args.force)
    if args.unpin:
        removed = store.unpin(units[0])
        store.close()
        print(
            f"{units[0]}: baseline unpinned" if removed else f"{units[0]}: no baseline was pinned"
        )
        log.info("baseline_unpinned", unit=units[0], removed=removed)
        return EXIT_OK
    if args.pin is not None:
        if args.pin == "latest-ready":
            ready = [r for r in store.startups(units) if r.outcome == "ready"]
            if not ready:
                raise NoDataError(f"{units[0]}: no ready startup recorded to pin")
            record = ready[-1]
        else:
            record = store.find_startup(args.pin, units)
        if record.outcome != "ready":
            raise UsageError(
                f"startup {record.invocation_id[:8]} is {record.outcome}; pin a ready startup"
            )
        store.pin(record.unit, record.invocation_id)
        store.close()
        log.info("baseline_pinned", unit=record.unit, invocation=record.invocation_id[:8])
        print(f"{record.unit}: pinned startup {record.invocation_id[:8]} as baseline")
        return EXIT_OK
    pins = store.baselines()
    shown: dict[str, StartupRecord | None] = {
        unit: store.startup(pins[unit][0]) if unit in pins else None for unit in units
    }
    if args.json:
        policy = _policy(config)
        _emit_json(
            {u: startup_json(evaluate(store, r, policy)) if r else None for u, r in shown.items()}
        )
        return EXIT_OK
    for unit, pinned in shown.items():
        if pinned is None:
            print(f"{unit}: no baseline pinned (comparisons use the previous ready startup)")
        else:
            print(render_startups([pinned], {unit: pinned.invocation_id}))
    return EXIT_OK


def _baseline_export(store: StateStore, unit: str, path: Path, gpu: str) -> int:
    from .state import export_document

    pins = store.baselines()
    record = store.startup(pins[unit][0]) if unit in pins else None
    if record is None:
        raise NoDataError(f"{unit}: no baseline pinned to export; pin one with --pin first")
    doc = export_document(record, unit=unit, gpu=gpu)
    try:
        path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot write: {exc.strerror or exc}") from exc
    log.info("baseline_exported", unit=unit, sha256=doc["sha256"], path=str(path))
    print(
        f"{unit}: exported baseline {record.invocation_id[:8]} to {path} (sha256 {doc['sha256']})"
    )
    return EXIT_OK


def _baseline_import(store: StateStore, unit: str, path: Path, gpu: str, force: bool) -> int:
    from .state import BaselineFileError, mismatches, read_document

    file = read_document(path)
    ready = [r for r in store.startups([unit]) if r.outcome == "ready"]
    problems = mismatches(file, ready[-1] if ready else None, unit=unit, gpu=gpu)
    if problems and not force:
        raise BaselineFileError(
            f"{path}: refusing to import for {unit}:\n  "
            + "\n  ".join(problems)
            + "\n(use --force to import anyway)"
        )
    with store.transaction():
        saved = store.save_startup(file.record, None)
    store.pin(unit, file.record.invocation_id)
    store.close()
    log.info("baseline_imported", unit=unit, sha256=file.sha256, forced=bool(problems))
    note = f" despite: {'; '.join(problems)}" if problems else ""
    if saved is None:
        note += " (kept the copy already imported: it has the log templates this file lacks)"
    elif file.record.ledger is None:
        note += (
            " (the file has no log templates, exported by an older sentinel: downgrade "
            "messages are not compared with it; export it again and import it)"
        )
    print(f"{unit}: pinned imported baseline sha256 {file.sha256}{note}")
    return EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    """A and B given: A → B. Only A: A's baseline → A. Neither: baseline → latest."""
    config = _load(args)
    store = StateStore(config.state_dir, readonly=True)
    policy = _policy(config)
    units = list(config.targets)
    if args.a and args.b:
        a, b = store.find_startup(args.a), store.find_startup(args.b)
    else:
        b = store.find_startup(args.a or "latest", None if args.a else units)
        baseline = evaluate(store, b, policy).baseline
        if baseline is None:
            raise NoDataError(
                f"startup {b.invocation_id[:8]}: no pinned baseline and no earlier ready startup"
            )
        a = baseline
    evidence = common_evidence(b, a)
    if args.log:
        diff = log_diff(b, a, accepted_patterns(policy))
        if args.json:
            _emit_json(
                {"a": a.invocation_id, "b": b.invocation_id, "log_diff": diff and diff.to_json()}
            )
        else:
            print(render_log_diff(a, b, diff))
        return EXIT_OK
    if args.json:
        _emit_json(
            {
                "a": startup_json(evaluate(store, a, policy)),
                "b": startup_json(evaluate(store, b, policy)),
                "evidence": [render_evidence(e) for e in evidence],
            }
        )
    else:
        print(render_diff(a, b, evidence))
    return EXIT_OK


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value <= 86400 * 7:
        raise argparse.ArgumentTypeError(f"{text!r}: give 0 to 604800 seconds")
    return value


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (0 = all)")
    return int(text)


def cmd_check(args: argparse.Namespace) -> int:
    """Exit 1 on findings of warning or worse, else 4 while a latest startup is starting, else 0.

    With `--wait S` a startup still starting is re-read (read-only) every WAIT_POLL_S until it is
    decided or S seconds passed; the daemon (or a scan) is what writes the verdict.
    """
    config = _load(args)
    policy = _policy(config)
    units = list(config.targets)
    deadline = time.monotonic() + args.wait
    while True:
        results = _check_once(config, units, policy)
        pending = any(c.record.outcome == "starting" for c in results)
        # A finding (a stalled startup, a failed one next to it) is a verdict already.
        failing = any(
            SEVERITY_ORDER[f.severity] >= SEVERITY_ORDER["warning"]
            for c in results
            for f in c.findings
        )
        if failing or not pending or time.monotonic() >= deadline:
            break
        time.sleep(min(WAIT_POLL_S, max(0.0, deadline - time.monotonic())))
    if args.json:
        _emit_json(scan_json(results))
    else:
        print(render_report(results))
    if failing:
        return EXIT_FINDINGS
    if pending:
        return EXIT_PENDING
    return EXIT_OK


def _check_once(config: Config, units: Sequence[str], policy: Policy) -> list[Comparison]:
    """Each unit's latest startup, as its status (compare/status.py) has it: the one under way
    while there is one, judged now."""
    try:
        store = StateStore(config.state_dir, readonly=True)
    except SentinelError as exc:
        raise NoDataError(str(exc)) from exc
    try:
        statuses = unit_status(store, units, policy, now=time.time(), history=0)
    finally:
        store.close()
    results = []
    for s in statuses:
        if s.latest is None:
            raise NoDataError(f"{s.unit}: no startups recorded")
        results.append(s.latest)
    return results


def cmd_report(args: argparse.Namespace) -> int:
    config = _load(args)
    try:
        store = StateStore(config.state_dir, readonly=True)
    except SentinelError as exc:
        raise NoDataError(str(exc)) from exc
    policy = _policy(config)
    units = list(config.targets)
    statuses = unit_status(store, units, policy, now=time.time())
    if args.html is None:
        # Each unit's latest decided startup, then the one under way (judged now): the last
        # one shown is the one the unit's verdict is about.
        shown = [c for s in statuses for c in (s.comparison, s.starting) if c is not None]
        print(render_report(shown))
        return EXIT_OK
    page = render_page(statuses, generated_at=time.time(), version=__version__)
    if args.html == "-":
        sys.stdout.write(page)
        return EXIT_OK
    try:
        Path(args.html).write_text(page, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--html {args.html}: {exc.strerror or exc}") from exc
    print(f"wrote {args.html}", file=sys.stderr)
    return EXIT_OK


def cmd_rules_check(args: argparse.Namespace) -> int:
    dirs = args.dirs or [default_rules_dir()]
    problems = check_rules(dirs)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problem(s)", file=sys.stderr)
        return EXIT_FINDINGS
    print(f"rules ok: {', '.join(map(str, dirs))}")
    return EXIT_OK


def cmd_config(args: argparse.Namespace) -> int:
    config = _load(args)
    sys.stdout.write(yaml.safe_dump(config_to_dict(config), sort_keys=False))
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from .daemon import run_daemon

    config = _load(args)
    return run_daemon(config, loader=lambda: _load(args))


COMMANDS = {
    "scan": cmd_scan,
    "startups": cmd_startups,
    "baseline": cmd_baseline,
    "diff": cmd_diff,
    "check": cmd_check,
    "report": cmd_report,
    "config": cmd_config,
    "run": cmd_run,
}


def _join_option_values(argv: Sequence[str]) -> list[str]:
    """`--since -2h` -> `--since=-2h`: argparse takes a value that starts with '-' for an option."""
    out: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg == "--since":
            value = next(it, None)
            if value is not None:
                out.append(f"--since={value}")
                continue
        out.append(arg)
    return out


def _state_path(args: argparse.Namespace) -> Path:
    try:
        return _load(args).state_dir / DB_NAME
    except SentinelError:
        return Path("sentinel.sqlite3")


def main(argv: Sequence[str] | None = None) -> int:
    argv = _join_option_values(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
    except UsageError as exc:
        print_error(f"error: {exc}")
        return EXIT_USAGE
    configure_logging("auto", "warning" if args.command != "run" else "info")
    try:
        if args.command == "rules":
            return cmd_rules_check(args)
        return COMMANDS[args.command](args)
    except RuleError as exc:
        print_error("error: invalid rules:\n" + "\n".join(exc.problems))
        return EXIT_USAGE
    except ConfigError as exc:
        print_error("error: invalid configuration:\n  " + "\n  ".join(exc.problems))
        return EXIT_USAGE
    except sqlite3.DatabaseError as exc:  # corruption found past the open-time check
        print(f"error: {broken_database(_state_path(args), exc)}", file=sys.stderr)
        return EXIT_USAGE
    except (UsageError, NoDataError, JournalError) as exc:
        print_error(f"error: {exc}")
        return EXIT_USAGE
    except SentinelError as exc:
        print_error(f"error: {exc}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # the one place a bug becomes exit 3 instead of a traceback
        print_error(f"internal error: {type(exc).__name__}: {exc} (please report)")
        return EXIT_INTERNAL


if __name__ == "__main__":
    raise SystemExit(main())
