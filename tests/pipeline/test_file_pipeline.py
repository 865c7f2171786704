"""Container and pod log files through the whole pipeline: startups, comparisons, the cursor.

A scan and a reader killed at random points (its uncommitted work lost, as SIGKILL loses it)
and restarted from the state, through rotations, give the same startup records."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest
from logfiles import Clock, DockerDir, PodDir, server_args, sglang_start

from sglang_sentinel.cli import main
from sglang_sentinel.config.schema import Config, JournalConfig, KubernetesConfig
from sglang_sentinel.pipeline import Pipeline, build_source, load_rules_and_policy, source_key
from sglang_sentinel.state import StateStore

NAME = "sglang"
CIDS = ["1" * 64, "2" * 64]


def scan_doc(capsys: pytest.CaptureFixture[str], state: Path, *argv: str) -> dict[str, Any]:
    code = main(["scan", "--state-dir", str(state), "--json", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def test_docker_json_file_restart_and_recreate_are_startups(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    clock = Clock()
    root = tmp_path / "docker"
    c = DockerDir(root, CIDS[0], NAME, clock)
    sglang_start(c.line, "2026-01-01", 128)
    c.rotate(max_file=3)
    sglang_start(c.line, "2026-01-02", 96)  # restart: the same file goes on
    c.rotate(max_file=3, compress=True)
    DockerDir(root, "9" * 64, "other", clock).line(server_args("2026-01-02"))
    again = DockerDir(root, CIDS[1], NAME, clock)  # docker rm + docker run
    sglang_start(again.line, "2026-01-03", 128)
    (tmp_path / "journal").mkdir()
    argv = [
        "--container",
        NAME,
        "--docker-root",
        str(root),
        "--journal-dir",
        str(tmp_path / "journal"),
    ]
    doc = scan_doc(capsys, tmp_path / "s", *argv)
    got = [(s["unit"], s["outcome"], s["facts"]["max_running_requests"]) for s in doc["startups"]]
    assert got == [
        ("docker:sglang", "ready", 128),
        ("docker:sglang", "ready", 96),
        ("docker:sglang", "ready", 128),
    ]
    for s in doc["startups"]:
        assert s["server_args"]["cuda_graph_bs"] == list(range(6000))
        assert s["facts"]["attention_backend"] == "fa3"
    assert [f["check"] for f in doc["startups"][1]["findings"]] == ["max_running_requests_drop"]
    assert "sk-file-secret-42" not in json.dumps(doc)
    # A second scan of the same files finds the same startups under the same ids.
    ids = [s["invocation_id"] for s in doc["startups"]]
    assert [s["invocation_id"] for s in scan_doc(capsys, tmp_path / "s2", *argv)["startups"]] == ids


def test_pod_logs_restarts_and_new_pods_are_startups(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    clock = Clock()
    root = tmp_path / "pods"
    old = PodDir(root, "llm", "sglang-7d9f8b6c4d-x2kqz", "u1", clock)
    sglang_start(lambda t: old.line("server", 0, t), "2026-01-01", 128)
    old.rotate("server", 0, "20260101-110000")
    sglang_start(lambda t: old.line("server", 1, t), "2026-01-02", 64)  # container restart
    new = PodDir(root, "llm", "sglang-5f6d7c8b9-h4jzt", "u2", clock)  # rolling update
    sglang_start(lambda t: new.line("server", 0, t), "2026-01-03", 128)
    doc = scan_doc(capsys, tmp_path / "s", "--pod", "llm/sglang/server", "--pod-logs", str(root))
    got = [(s["unit"], s["facts"]["max_running_requests"]) for s in doc["startups"]]
    assert got == [
        ("k8s:llm/sglang/server", 128),
        ("k8s:llm/sglang/server", 64),
        ("k8s:llm/sglang/server", 128),
    ]
    assert [f["check"] for f in doc["startups"][1]["findings"]] == ["max_running_requests_drop"]


def records(store: StateStore, target: str) -> list[tuple[str, str, Any, dict[str, int]]]:
    return [
        (r.invocation_id, r.outcome, r.facts["max_running_requests"], dict(r.rule_hits))
        for r in store.startups((target,))
    ]


def test_killed_and_restarted_reader_records_every_startup_once(tmp_path: Path) -> None:
    """Lines written with rotations (rename, gzip, delete-and-recreate) while a reader commits
    in small slices and is killed at random (uncommitted work lost) and restarted: the records
    equal those of one scan at the end."""
    rng = random.Random(22)
    clock = Clock()
    root = tmp_path / "docker"
    (tmp_path / "journal").mkdir()
    config = Config(
        units=(),
        containers=(NAME,),
        docker_root=root,
        journal=JournalConfig(directory=tmp_path / "journal"),
        kubernetes=KubernetesConfig(pod_logs=tmp_path / "pods", pods=("llm/sglang-0/server",)),
        state_dir=tmp_path / "state",
    )
    rules, policy = load_rules_and_policy(config)
    c = DockerDir(root, CIDS[0], NAME, clock)
    pod = PodDir(tmp_path / "pods", "llm", "sglang-0", "u1", clock)

    def reader() -> Pipeline:
        source = build_source(config)
        source.open(follow=False)
        p = Pipeline(
            source, rules, policy, StateStore(config.state_dir), source_key=source_key(config)
        )
        p.resume(from_boot_start=False)
        return p

    p = reader()
    kills = rotations = 0
    # A container's max-file is fixed when it is created (moby keeps its log options; `docker
    # update` cannot change them), and rotation then always removes the oldest file first. A
    # rotation with a smaller max-file than the one before left the older `.N` behind, which no
    # engine does (and which the reader, trusting oldest-first removal, read again).
    max_file = rng.choice([2, 3, 4])
    # `make soak` runs it with SENTINEL_SOAK_KILLS=100: about 1.7 days per kill.
    days = max(12, int(int(os.environ.get("SENTINEL_SOAK_KILLS", "0")) * 1.7))
    for day in range(1, days + 1):
        stamp = f"2026-{1 + day // 28:02d}-{1 + day % 28:02d}"
        sglang_start(c.line, stamp, 1000 - day, noise=rng.randrange(30))
        sglang_start(lambda t, d=day: pod.line("server", d, t), stamp, 64 + day, noise=5)
        # Part of it read, some of that committed; then the files rotate under the reader.
        for _ in range(rng.randrange(1, 4)):
            if p.process(limit=rng.randrange(1, 40)) and rng.random() < 0.6:
                p.commit(force=True)
        if rng.random() < 0.7:
            c.rotate(max_file=max_file, compress=rng.random() < 0.5)
            rotations += 1
        if rng.random() < 0.5:
            pod.rotate("server", day, f"2026{day:04d}-120000", keep=3)
            rotations += 1
        p.process(limit=rng.randrange(1, 40))
        if rng.random() < 0.6:
            p.source.close()  # killed: what it read since its last commit is lost
            p.store.close()
            p = reader()
            kills += 1
        while True:  # caught up, and committed, as the daemon is after each drain
            n = p.process(limit=rng.randrange(20, 200))
            p.commit(force=True)
            if not n:
                break
    while p.process(limit=1000):
        p.commit(force=True)
    p.commit(final=True)
    followed = {t: records(p.store, t) for t in config.targets}
    p.store.close()
    print(f"kills={kills} rotations={rotations}")
    assert kills >= 5 and rotations >= 10
    assert [r[2] for r in followed["docker:sglang"]] == [1000 - d for d in range(1, days + 1)]
    assert [r[2] for r in followed["k8s:llm/sglang-0/server"]] == [
        64 + d for d in range(1, days + 1)
    ]
    for target, recs in followed.items():
        assert len({r[0] for r in recs}) == days, target
        for _inv, outcome, _mrr, hits in recs:
            assert outcome == "ready"
            assert hits.get("server_args") == 1, (target, hits)
