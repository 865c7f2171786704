"""A real dockerd writing json-file logs: a container's starts (run, restart, rm + run) through
max-size/max-file rotation, its 16 KiB-split server_args line, read by `sentinel scan` and by a
following `sentinel run`."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dockerd import IMAGE, SCRIPT, Dockerd, running_dockerd
from sentinelproc import Sentinels, cli_stdout, wait_until

pytestmark = pytest.mark.engines


@pytest.fixture
def dockerd(tmp_path: Path) -> Any:
    with running_dockerd(tmp_path / "docker") as d:
        yield d


def run_container(d: Dockerd, name: str) -> None:
    d.docker(
        "run",
        "--name",
        name,
        "--network",
        "none",
        "--log-driver",
        "json-file",
        "--log-opt",
        "max-size=40k",
        "--log-opt",
        "max-file=20",
        IMAGE,
        "/bin/sh",
        "-c",
        SCRIPT,
    )


def startups(state: Path, name: str) -> list[tuple[str, str, Any]]:
    out = cli_stdout(
        "startups", "--state-dir", str(state), "--container", name, "--json", timeout=60
    )
    return [
        (s["invocation_id"], s["outcome"], s["facts"]["max_running_requests"])
        for s in json.loads(out)["startups"]
    ]


def test_real_dockerd_json_file_starts_rotation_and_split_line(
    dockerd: Dockerd, sentinels: Sentinels, tmp_path: Path
) -> None:
    name = f"sgl-files-{os.getpid()}"
    journal = tmp_path / "journal"
    journal.mkdir()
    sel = [
        "--container",
        name,
        "--docker-root",
        str(dockerd.data_root),
        "--journal-dir",
        str(journal),
    ]
    state = tmp_path / "state"
    daemon = sentinels.start(*sel, state=state)
    run_container(dockerd, name)  # attached: returns when the start's lines are written
    first = dockerd.container_id(name)
    dockerd.docker("start", "-a", name)  # a restart: the same file, a new start
    cdir = dockerd.data_root / "containers" / first
    assert sorted(p.name[len(first) :] for p in cdir.glob("*-json.log*"))[:3] == [
        "-json.log",
        "-json.log.1",
        "-json.log.2",
    ]  # max-size rotated the file (twice at least)
    # A scan of the files as they are now (docker rm removes them): the same startups, under
    # the same ids, as the daemon records; the restart is a regression.
    doc = json.loads(
        cli_stdout("scan", "--state-dir", str(tmp_path / "scan"), "--json", *sel, timeout=120)
    )
    unit = f'unit="docker:{name}"'

    def ready(n: int) -> Callable[[str], bool]:
        def check(text: str) -> bool:
            return any(
                line.startswith("sglang_sentinel_startups_total{")
                and unit in line
                and 'outcome="ready"' in line
                and line.endswith(f" {n}.0")
                for line in text.splitlines()
            )

        return check

    # `docker rm` deletes the files: the daemon must have read them first (a reader that is
    # behind has lost what a removed container's files held, as any reader of them would).
    wait_until(daemon.scrape_when(ready(2)), 60, "two ready startups on /metrics")
    dockerd.docker("rm", name)
    run_container(dockerd, name)  # recreated: a new id, a new file
    assert dockerd.container_id(name) != first
    wait_until(daemon.scrape_when(ready(3)), 60, "three ready startups on /metrics")
    followed = startups(state, name)
    assert [(o, m) for _i, o, m in followed] == [("ready", 128), ("ready", 96), ("ready", 128)]
    assert [s["invocation_id"] for s in doc["startups"]] == [i for i, _o, _m in followed[:2]]
    assert [f["check"] for f in doc["startups"][1]["findings"]] == ["max_running_requests_drop"]
    for s in doc["startups"]:
        assert s["server_args"]["cuda_graph_bs"] == list(range(6000))  # its pieces joined
    assert "sk-real-docker-9" not in json.dumps(doc)
