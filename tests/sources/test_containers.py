"""Docker containers (journald log driver) and podman quadlets, on real journal files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dockerjournal import COPIER_BUF, Container, DockerHost
from journaltools import ExportValue, StartupScript, build_journal, write_export

from sglang_sentinel.cli import main
from sglang_sentinel.config import Config
from sglang_sentinel.model import JournalEntry
from sglang_sentinel.pipeline import Pipeline, load_rules_and_policy
from sglang_sentinel.sources import JournalSource
from sglang_sentinel.sources.containers import PartialLines, start_id
from sglang_sentinel.state import StateStore
from sglang_sentinel.text import clean_message

NAME = "sgl-test-qwen"


def server_args_line(when: str, api_key: str = "sk-docker-secret-42") -> str:
    """A 0.5.x ServerArgs repr padded past the copier's 16 KiB, as a long cuda_graph_bs makes it."""
    bs = ", ".join(str(i) for i in range(6000))
    return (
        f"[{when}] server_args=ServerArgs(model_path='/models/Qwen3-8B', tp_size=2, "
        f"api_key='{api_key}', cuda_graph_bs=[{bs}], disable_cuda_graph=False, "
        "attention_backend='fa3', enable_piecewise_cuda_graph=True, dp_size=1)"
    )


def sglang_start(c: Container, day: str, mrr: int, *, interleave: str | None = None) -> None:
    """One SGLang start inside the container: server_args (split), summary line, ready."""
    c.start()
    line = server_args_line(f"{day} 10:00:01")
    assert len(line.encode()) > 2 * COPIER_BUF
    before = len(c.host.entries)
    c.line(line, when=f"{day} 10:00:01")
    if interleave is not None:
        # The copier reads stdout and stderr in their own goroutines: the pieces of a long
        # stdout line can land between the pieces of a stderr line.
        pieces = c.host.entries[before:]
        del c.host.entries[before:]
        c.line(interleave, stream="stdout")
        others = c.host.entries[before:]
        del c.host.entries[before:]
        for n, piece in enumerate(pieces):
            c.host.entries.append(piece)
            c.host.entries.extend(others[n : n + 1])
        c.host.entries.extend(others[len(pieces) :])
        region = c.host.entries[before:]
        times = sorted((e["__REALTIME_TIMESTAMP"], e["__MONOTONIC_TIMESTAMP"]) for e in region)
        for entry, (real, mono) in zip(region, times, strict=True):
            entry["__REALTIME_TIMESTAMP"], entry["__MONOTONIC_TIMESTAMP"] = real, mono
    c.line(
        f"[{day} 10:00:50 TP0] max_total_num_tokens=400000, chunked_prefill_size=8192, "
        f"max_prefill_tokens=16384, max_running_requests={mrr}, context_len=40960, "
        "available_gpu_mem=20.00 GB",
        when=f"{day} 10:00:50",
    )
    c.line(f"[{day} 10:00:55] The server is fired up and ready to roll!", when=f"{day} 10:00:55")


def journal(tmp_path: Path, entries: list[dict[str, ExportValue]]) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    ordered = sorted(entries, key=lambda e: int(e["__REALTIME_TIMESTAMP"]))
    return build_journal(write_export(ordered, tmp_path / "j.export"), tmp_path / "journal")


def scan(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, jdir: Path, *sel: str
) -> dict[str, Any]:
    argv = ["scan", "--journal-dir", str(jdir), "--state-dir", str(tmp_path / "s"), "--json"]
    code = main([*argv, *sel])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def test_restart_and_recreate_are_new_startups_split_server_args_parsed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A docker restart (new CONTAINER_LOG_EPOCH) and a recreated container (new
    CONTAINER_ID_FULL) each open a startup, although all lines share dockerd's invocation id;
    the 16 KiB pieces of server_args are joined, even with a stdout line between them."""
    host = DockerHost()
    c = host.container(NAME)
    other = host.container("sgl-other")
    sglang_start(c, "2026-01-01", 128, interleave="entrypoint: " + "PATH=/usr/bin " * 2000)
    sglang_start(other, "2026-01-02", 7)  # not watched: must not leak into NAME's startups
    sglang_start(c, "2026-01-03", 96)  # docker restart: same id, new epoch
    recreated = c.recreate()
    sglang_start(recreated, "2026-01-05", 128)
    assert {e["_SYSTEMD_INVOCATION_ID"] for e in host.entries} == {host.dockerd_invocation}

    doc = scan(capsys, tmp_path, journal(tmp_path, host.entries), "--container", NAME)
    got = [
        (s["unit"], s["started_at"][:10], s["outcome"], s["facts"]["max_running_requests"])
        for s in doc["startups"]
    ]
    assert got == [
        ("docker:sgl-test-qwen", "2026-01-01", "ready", 128),
        ("docker:sgl-test-qwen", "2026-01-03", "ready", 96),
        ("docker:sgl-test-qwen", "2026-01-05", "ready", 128),
    ]
    for s in doc["startups"]:
        assert s["server_args"]["tp_size"] == 2
        assert s["server_args"]["dp_size"] == 1
        assert s["server_args"]["cuda_graph_bs"] == list(range(6000))
        assert s["facts"]["model_path"] == "/models/Qwen3-8B"
        assert s["facts"]["attention_backend"] == "fa3"
    ids = [s["invocation_id"] for s in doc["startups"]]
    # One startup per (container id, epoch).
    assert ids == [start_id(cid, epoch) for cid, epoch in _starts(host.entries, NAME)]
    assert len(set(ids)) == 3
    # The restart regressed against the previous ready startup; the report names the container.
    assert [f["check"] for f in doc["startups"][1]["findings"]] == ["max_running_requests_drop"]
    assert "sk-docker-secret-42" not in json.dumps(doc)


def _starts(entries: list[dict[str, ExportValue]], name: str) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    for e in entries:
        key = (str(e.get("CONTAINER_ID_FULL")), str(e.get("CONTAINER_LOG_EPOCH")))
        if e.get("CONTAINER_NAME") == name and key not in seen:
            seen.append(key)
    return seen


def test_engine_without_epoch_splits_on_server_args(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Engines without moby ef5b279887 (2022) write no CONTAINER_LOG_EPOCH and no partial ids: a restart is the
    next server_args line, and the pieces (CONTAINER_PARTIAL_MESSAGE=true) still join."""
    host = DockerHost()
    c = host.container(NAME)
    c.with_epoch = False
    sglang_start(c, "2026-01-01", 128)
    sglang_start(c, "2026-01-03", 64)
    assert not any("CONTAINER_PARTIAL_ID" in e or "CONTAINER_LOG_EPOCH" in e for e in host.entries)
    assert sum(e.get("CONTAINER_PARTIAL_MESSAGE") == "true" for e in host.entries) == 4
    doc = scan(capsys, tmp_path, journal(tmp_path, host.entries), "--unit", f"docker:{NAME}")
    got = [
        (s["facts"]["max_running_requests"], s["server_args"]["tp_size"]) for s in doc["startups"]
    ]
    assert got == [(128, 2), (64, 2)]


def test_containers_key_in_config_and_units_together(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    host = DockerHost()
    sglang_start(host.container(NAME), "2026-01-01", 128)
    unit = StartupScript(unit="sgl-test-unit.service", start="2026-01-02 10:00:00")
    unit.started("2026-01-02 10:00:00")
    unit.line("[2026-01-02 10:00:55] The server is fired up and ready to roll!")
    jdir = journal(tmp_path, [*host.entries, *unit.entries()])
    config = tmp_path / "config.yaml"
    config.write_text(f"units: [sgl-test-unit]\ncontainers: [{NAME}]\n")
    doc = scan(capsys, tmp_path, jdir, "--config", str(config))
    assert [s["unit"] for s in doc["startups"]] == ["docker:sgl-test-qwen", "sgl-test-unit.service"]


def test_container_name_is_validated(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["scan", "--state-dir", str(tmp_path), "--container", "bad name!"])
    assert code == 2
    assert "not a Docker container name: 'bad name!'" in capsys.readouterr().err


def test_partial_lines_keyed_by_partial_id() -> None:
    p = PartialLines()
    assert p.add("docker:a", b"AB", partial=True, partial_id="1") is None
    assert p.add("docker:a", b"xy", partial=True, partial_id="2") is None
    assert p.add("docker:a", b"plain", partial=False, partial_id=None) == b"plain"
    assert p.add("docker:a", b"C", partial=False, partial_id="1") == b"ABC"
    assert p.add("docker:a", b"z", partial=False, partial_id="2") == b"xyz"


def test_a_split_line_that_never_ends_is_let_go_once_its_output_goes_on() -> None:
    """The last piece never came (journald's rate limit dropped it): the next line of the same
    output, or its next split line, lets the pieces go; the other output's lines do not.
    Before: held for the daemon's life (up to 1 MiB each, `pending` true from then on)."""
    p = PartialLines()
    assert p.add("docker:a", b"AB", partial=True, partial_id="1", output="3") is None
    assert p.add("docker:a", b"out", partial=False, partial_id=None, output="6") == b"out"
    assert p.add("docker:a", b"xy", partial=True, partial_id="2", output="6") is None
    assert p.pending
    assert p.add("docker:a", b"err", partial=False, partial_id=None, output="3") == b"err"
    assert p.dropped == 1  # "AB": stderr went on
    assert p.add("docker:a", b"uv", partial=True, partial_id="4", output="6") is None
    assert p.dropped == 2  # "xy": stdout's next split line began
    assert p.add("docker:a", b"w", partial=False, partial_id="4", output="6") == b"uvw"
    assert not p.pending
    # Engines without partial ids: the next unmarked line of the container ends the pieces.
    assert p.add("docker:a", b"C", partial=True, partial_id=None, output="3") is None
    assert p.add("docker:a", b"D", partial=False, partial_id=None, output="3") == b"CD"
    assert (p.dropped, p.pending) == (2, False)


def test_the_journal_source_lets_a_line_without_its_last_piece_go(tmp_path: Path) -> None:
    host = DockerHost()
    c = host.container(NAME).start()
    c.line("x" * (2 * COPIER_BUF + 10), when="2026-01-01 10:00:00")
    assert host.entries[-1]["CONTAINER_PARTIAL_LAST"] == "true"
    del host.entries[-1]  # journald's rate limit dropped the last piece
    c.line("the next stderr line", when="2026-01-01 10:00:01")
    c.line("a stdout line", when="2026-01-01 10:00:02", stream="stdout")
    source = JournalSource([f"docker:{NAME}"], directory=journal(tmp_path, host.entries))
    source.open()
    source.seek_head()
    got = [i.message if isinstance(i, JournalEntry) else clean_message(i) for i in source.lines()]
    assert got == ["the next stderr line", "a stdout line"]
    assert not source.partial_pending  # was true for good: commits held, the fast path off
    source.close()


# --- podman quadlets ---------------------------------------------------------------------------

QUADLET = "sgl-test-quadlet"
PODMAN_CMD = (
    f"/usr/bin/podman run --name=systemd-{QUADLET} --cidfile=/run/{QUADLET}.cid --replace --rm "
    "--cgroups=split --log-driver passthrough --sdnotify=conmon -d lmsysorg/sglang:v0.5.4 "
    "python3 -m sglang.launch_server --model-path /models/Qwen3-8B --tp-size 2"
)


def quadlet_start(day: str, mrr: int, *, journald_driver: bool) -> StartupScript:
    """NAME.container -> NAME.service. passthrough: the container's stdio is the unit's, so its
    lines are plain unit lines (SYSLOG_IDENTIFIER=NAME). LogDriver=journald: conmon, in the
    unit's cgroup, sends them with CONTAINER_* fields (conmon src/ctr_logging.c), splitting
    long lines into 8 KiB pieces marked CONTAINER_PARTIAL_MESSAGE=true."""
    s = StartupScript(
        unit=f"{QUADLET}.service",
        identifier=QUADLET,
        comm="conmon" if journald_driver else "podman",
        exe="/usr/bin/conmon" if journald_driver else "/usr/bin/podman",
        cmdline=PODMAN_CMD,
        start=f"{day} 10:00:00",
        boot_at="2026-01-01 00:00:00",
    )
    s.started(f"{day} 10:00:00")
    lines = [
        server_args_line(f"{day} 10:00:01"),
        f"[{day} 10:00:50 TP0] max_total_num_tokens=400000, chunked_prefill_size=8192, "
        f"max_prefill_tokens=16384, max_running_requests={mrr}, context_len=40960, "
        "available_gpu_mem=20.00 GB",
        f"[{day} 10:00:55] The server is fired up and ready to roll!",
    ]
    cid = "c0ffee" * 10 + "abcd"
    for text in lines:
        if not journald_driver:
            s.line(text)
            continue
        pieces = [text[i : i + 8192] for i in range(0, len(text), 8192)]
        for n, piece in enumerate(pieces, start=1):
            s.line(piece)
            entry = s._entries[-1]
            entry["_TRANSPORT"] = "journal"
            del entry["_STREAM_ID"]
            entry.update(
                {
                    "CONTAINER_ID_FULL": cid,
                    "CONTAINER_ID": cid[:12],
                    "CONTAINER_NAME": f"systemd-{QUADLET}",
                    "PRIORITY": "3",
                }
            )
            if n < len(pieces):
                entry["CONTAINER_PARTIAL_MESSAGE"] = "true"
    return s


@pytest.mark.parametrize("journald_driver", [False, True], ids=["passthrough", "journald"])
def test_quadlet_is_watched_as_its_service(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, journald_driver: bool
) -> None:
    """A quadlet restart is a new invocation of NAME.service, with either log driver."""
    a = quadlet_start("2026-01-01", 128, journald_driver=journald_driver)
    b = quadlet_start("2026-01-02", 100, journald_driver=journald_driver)
    jdir = journal(tmp_path, [*a.entries(), *b.entries()])
    doc = scan(capsys, tmp_path, jdir, "--unit", QUADLET)
    got = [
        (s["unit"], s["invocation_id"], s["facts"]["max_running_requests"], s["facts"]["tp_size"])
        for s in doc["startups"]
    ]
    assert got == [
        (f"{QUADLET}.service", a.invocation_id, 128, 2),
        (f"{QUADLET}.service", b.invocation_id, 100, 2),
    ]
    assert doc["startups"][1]["findings"][0]["check"] == "max_running_requests_drop"


def open_pipeline(journal: Path, state: Path) -> Pipeline:
    target = f"docker:{NAME}"
    rules, policy = load_rules_and_policy(Config(units=(target,)))
    source = JournalSource([target], directory=journal)
    source.open()
    return Pipeline(source, rules, policy, StateStore(state), source_key="test")


def drain(p: Pipeline) -> None:
    while p.process(limit=1000):
        p.commit()
    p.commit(final=True)


def test_a_commit_between_the_pieces_of_a_container_line_keeps_the_cursor_before_them(
    tmp_path: Path,
) -> None:
    """Stopped after any piece: the restart reads the whole line again (no half server_args)."""
    host = DockerHost()
    c = host.container(NAME).start()
    c.line("entrypoint: starting sglang.launch_server", when="2026-01-01 10:00:00")
    epoch = c.epoch
    sglang_start(c, "2026-01-01", 128)
    for e in host.entries:  # one start: the entrypoint line and SGLang's lines
        e["CONTAINER_LOG_EPOCH"] = str(epoch)
    jdir = journal(tmp_path, host.entries)
    whole = open_pipeline(jdir, tmp_path / "oneshot")
    drain(whole)
    [want] = whole.store.startups([f"docker:{NAME}"])
    assert want.server_args["cuda_graph_bs"] == list(range(6000))
    for cut in range(1, len(host.entries)):
        p = open_pipeline(jdir, tmp_path / f"state-{cut}")
        p.process(limit=cut)
        p.commit()
        p.source.close()
        p.store.close()  # a SIGKILL here loses only memory
        again = open_pipeline(jdir, tmp_path / f"state-{cut}")
        again.resume(from_boot_start=False)
        drain(again)
        [got] = again.store.startups([f"docker:{NAME}"])
        assert got.server_args == want.server_args, cut
        assert got.facts == want.facts, cut


def test_interleaved_containers_and_a_unit_keep_their_own_lines(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Lines of two containers (one dockerd invocation) and a unit, interleaved one by one:
    each startup gets only its own facts, whichever reading path a line takes."""
    host = DockerHost()
    a, b = host.container("sgl-test-a").start(), host.container("sgl-test-b").start()
    unit = StartupScript(unit="sgl-test-u.service", start="2026-01-01 10:00:00")
    unit.started("2026-01-01 10:00:00")

    def summary(when: str, mrr: int) -> str:
        return (
            f"[{when} TP0] max_total_num_tokens=1000, chunked_prefill_size=8192, "
            f"max_prefill_tokens=16384, max_running_requests={mrr}, context_len=4096, "
            "available_gpu_mem=10.00 GB"
        )

    second = iter(range(1, 60))

    def at() -> str:
        return f"2026-01-01 10:00:{next(second):02d}"

    for who in (a, b):
        when = at()
        who.line(f"[{when}] server_args=ServerArgs(model_path='/m', tp_size=1)", when=when)
    for n in range(3):  # a, b, unit, a, b, unit, ...: each line its own second
        for mrr, who in ((11, a), (22, b)):
            when = at()
            who.line(summary(when, mrr + n), when=when)
            who.line(f"[{when}] a second line of the same start", when=when)
        unit.line(summary(at(), 33 + n))
    for who in (a, b):
        when = at()
        who.line(f"[{when}] The server is fired up and ready to roll!", when=when)
    for n in range(4):  # batch lines after ready, alternating: the latest value is each one's own
        for base, who in ((100, a), (200, b)):
            when = at()
            who.line(
                f"[{when} TP0] Decode batch, #running-req: 5, #token: 900, token usage: 0.02, "
                f"cuda graph: True, gen throughput (token/s): {base + n}.50, #queue-req: 2",
                when=when,
            )
            who.line(
                f"[{when} TP0] Decode batch, #running-req: 5, #token: 900, token usage: 0.02, "
                f"cuda graph: True, gen throughput (token/s): {base + n}.25, #queue-req: 2",
                when=when,
            )
    jdir = journal(tmp_path, [*host.entries, *unit.entries()])
    doc = scan(
        capsys,
        tmp_path,
        jdir,
        "--container",
        "sgl-test-a",
        "--container",
        "sgl-test-b",
        "--unit",
        "sgl-test-u.service",
    )
    got = {s["unit"]: (s["facts"]["max_running_requests"], s["outcome"]) for s in doc["startups"]}
    # The first value wins for a primary (TP0) fact: each target's own first summary line.
    assert got == {
        "docker:sgl-test-a": (11, "ready"),
        "docker:sgl-test-b": (22, "ready"),
        "sgl-test-u.service": (33, "starting"),
    }
    store = StateStore(tmp_path / "s", readonly=True)
    records = {r.unit: r for r in store.startups(["docker:sgl-test-a", "docker:sgl-test-b"])}
    # The latest batch-line values live in memory (published after each commit), not in state.
    targets = ("docker:sgl-test-a", "docker:sgl-test-b")
    rules, policy = load_rules_and_policy(Config(units=targets))
    source = JournalSource(list(targets), directory=jdir)
    source.open()
    p = Pipeline(source, rules, policy, StateStore(tmp_path / "s2"), source_key="test")
    drain(p)
    source.close()
    latest = {v.unit: v.facts["gen_throughput"] for v in p.runtime.values()}
    assert latest == {"docker:sgl-test-a": 103.25, "docker:sgl-test-b": 203.25}
    for r in records.values():
        assert r.rule_hits["decode_batch"] == 8
        assert r.rule_hits["capacity_summary"] == 3
