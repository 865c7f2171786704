"""A fleet through Prometheus: 21 real `sentinel run` processes, one real Prometheus, the shipped
rule files (per-host and fleet).

Every sentinel reads its own journal directory and state directory and listens on its own
loopback port, as 21 GPU hosts would. All serve Qwen3-8B with TP 2 on the same GPU; 16 are
systemd units and 5 Docker containers (journald log driver), so one peer group mixes both.
One container host starts with 96 concurrent requests against ~128 on its peers: it alone
must fire SGLangCapacityBelowPeers. Twenty hosts import one baseline file; one pinned its own
startup instead: it alone is named by the baseline-drift rule (pending: that rule has
`for: 5m`). Timings are printed (run with -s).
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import test_alertmanager_e2e
from dockerjournal import DockerHost
from journaltools import ExportValue, StartupScript, build_journal, write_export
from sentinelproc import Sentinel, Sentinels, wait_until
from test_alertmanager_e2e import (
    LIVE_FOR,
    PROMETHEUS,
    REPO,
    Spawn,
    http_get,
    require_binary,
    rules_for_live_run,
    wait_for,
)

from sglang_sentinel.cli import main

# The process fixture of the Alertmanager end-to-end test: every process stopped by PID.
spawn = test_alertmanager_e2e.spawn

pytestmark = [pytest.mark.slow, pytest.mark.engines]

HOSTS = 21
CONTAINER_HOSTS = {3, 8, 12, 16, 20}  # these run SGLang in a Docker container
OUTLIER = 12  # a container host with less capacity than its peers
OWN_BASELINE = 5  # pinned its own startup instead of importing the fleet's baseline file
UNIT = "sgl-fleet.service"
CONTAINER = "sgl-fleet"
GPU = "H100-SXM-80GB"
RULE_FILES = [
    REPO / "deploy" / "prometheus" / "sglang-sentinel-alerts.yml",
    REPO / "deploy" / "prometheus" / "sglang-sentinel-fleet.yml",
]


def capacity(n: int) -> int:
    """max_running_requests of host n: peers between 124 and 130, the outlier at 96."""
    return 96 if n == OUTLIER else 124 + n % 7


def startup_lines(mrr: int) -> list[tuple[str, str]]:
    day = "2026-02-01"
    return [
        (
            f"{day} 10:00:01",
            f"[{day} 10:00:01] server_args=ServerArgs(model_path='/models/Qwen3-8B', "
            "tp_size=2, api_key='sk-fleet-test-000', dp_size=1, attention_backend='fa3')",
        ),
        (
            f"{day} 10:00:50",
            f"[{day} 10:00:50 TP0] max_total_num_tokens=400000, chunked_prefill_size=8192, "
            f"max_prefill_tokens=16384, max_running_requests={mrr}, context_len=40960, "
            "available_gpu_mem=20.00 GB",
        ),
        (f"{day} 10:00:55", f"[{day} 10:00:55] The server is fired up and ready to roll!"),
    ]


def host_journal(d: Path, n: int) -> Path:
    lines = startup_lines(capacity(n))
    entries: list[dict[str, ExportValue]]
    if n in CONTAINER_HOSTS:
        docker = DockerHost(hostname=f"gpu-{n:02d}")
        c = docker.container(CONTAINER).start()
        for when, text in lines:
            c.line(text, when=when)
        entries = docker.entries
    else:
        s = StartupScript(
            unit=UNIT,
            start="2026-02-01 10:00:00",
            boot_at="2026-02-01 00:00:00",
            hostname=f"gpu-{n:02d}",
        )
        s.started("2026-02-01 10:00:00")
        for when, text in lines:
            s.line(text, when=when)
        entries = s.entries()
    return build_journal(write_export(entries, d / "j.export"), d / "journal")


def target_flag(n: int) -> list[str]:
    return ["--container", CONTAINER] if n in CONTAINER_HOSTS else ["--unit", UNIT]


def prepare_host(root: Path, n: int) -> tuple[Path, Path]:
    """The host's journal, state (startup scanned) and config; returns (config, journal)."""
    d = root / f"host-{n:02d}"
    d.mkdir()
    journal = host_journal(d, n)
    config = d / "config.yaml"
    config.write_text(f"state_dir: {d / 'state'}\ngpu: {GPU}\nlog: {{format: json}}\n")
    assert (
        main(["scan", "--config", str(config), "--journal-dir", str(journal), *target_flag(n)]) == 0
    )
    return config, journal


@contextlib.contextmanager
def reserved_ports(count: int) -> Iterator[list[int]]:
    """`count` distinct free loopback ports (held together while chosen, then released)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        ports = [int(s.getsockname()[1]) for s in socks]
    yield ports


def prom_query(base: str, expr: str) -> list[dict[str, Any]] | None:
    status, body = http_get(f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}")
    if status != 200:
        return None
    result: list[dict[str, Any]] = json.loads(body)["data"]["result"]
    return result


def test_fleet_outlier_fires_and_its_peers_do_not(
    spawn: Spawn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prometheus = require_binary(PROMETHEUS, "prometheus")
    t0 = time.monotonic()

    # --- 21 hosts: journal, state, and the fleet's baseline -------------------------------------
    hosts = [prepare_host(tmp_path, n) for n in range(HOSTS)]
    fleet_file = tmp_path / "fleet-baseline.json"
    source, _ = hosts[0]
    assert main(["baseline", "--config", str(source), *target_flag(0), "--pin"]) == 0
    assert (
        main(["baseline", "--config", str(source), *target_flag(0), "--export", str(fleet_file)])
        == 0
    )
    fleet_sha = json.loads(fleet_file.read_text())["sha256"]
    for n, (config, _) in enumerate(hosts):
        if n == OWN_BASELINE:
            argv = ["baseline", "--config", str(config), *target_flag(n), "--pin"]
        else:
            argv = [
                "baseline",
                "--config",
                str(config),
                *target_flag(n),
                "--import",
                str(fleet_file),
            ]
        assert main(argv) == 0
    capsys.readouterr()
    prepared_s = time.monotonic() - t0

    # --- 21 `sentinel run` processes ------------------------------------------------------------
    sentinels = Sentinels(tmp_path)
    try:
        with reserved_ports(HOSTS + 1) as ports:
            pass  # the last one is Prometheus's
        running: list[Sentinel] = []
        for n, ((config, journal), port) in enumerate(zip(hosts, ports[:HOSTS], strict=True)):
            running.append(
                sentinels.start(
                    "--config",
                    str(config),
                    "--journal-dir",
                    str(journal),
                    *target_flag(n),
                    port=port,
                    ready=False,
                )
            )
        for s in running:
            s.wait_event("sentinel_started", timeout=60)
        # Each has its startup on /metrics before Prometheus starts.
        for s in running:
            wait_until(
                s.scrape_when(lambda b: "sglang_sentinel_baseline_info{" in b), 30, "baseline_info"
            )
        sentinels_s = time.monotonic() - t0

        # --- one Prometheus scraping all of them with the shipped rules -----------------------
        targets = ", ".join(f"'127.0.0.1:{s.port}'" for s in running)
        # The shipped rules; the outlier alert's `for: 1m` is LIVE_FOR here (promtool's unit
        # tests hold it pending for its minute), the drift rule keeps its 5m (pending below).
        alerts, fleet = RULE_FILES
        live = rules_for_live_run(fleet, {"SGLangCapacityBelowPeers"}, tmp_path / "fleet.yml")
        prom_config = tmp_path / "prometheus.yml"
        prom_config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "rule_files:\n"
            + "".join(f"  - {f}\n" for f in (alerts, live))
            + "scrape_configs:\n  - job_name: sglang-sentinel\n"
            f"    static_configs:\n      - targets: [{targets}]\n"
        )
        prom_port = ports[HOSTS]
        prom = spawn(
            "prometheus",
            [
                str(prometheus),
                f"--config.file={prom_config}",
                f"--storage.tsdb.path={tmp_path / 'prom-data'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ],
        )
        base = f"http://127.0.0.1:{prom_port}"
        wait_for("Prometheus ready", lambda: http_get(base + "/-/ready")[0] == 200, 30.0, prom)
        prom_started = time.monotonic()
        wait_for(
            "all 21 targets up",
            lambda: (
                (r := prom_query(base, 'sum(up{job="sglang-sentinel"})'))
                and r[0]["value"][1] == str(HOSTS)
            ),
            30.0,
            prom,
        )
        all_up_s = time.monotonic() - prom_started

        outlier = running[OUTLIER]
        firing, _ = wait_for(
            "SGLangCapacityBelowPeers firing",
            lambda: prom_query(
                base, 'ALERTS{alertname="SGLangCapacityBelowPeers",alertstate="firing"}'
            ),
            120.0,
            prom,
        )
        fired_s = time.monotonic() - prom_started

        # The outlier and nobody else, named as Prometheus scrapes it and as its container.
        assert [a["metric"] for a in firing] == [
            {
                "__name__": "ALERTS",
                "alertname": "SGLangCapacityBelowPeers",
                "alertstate": "firing",
                "severity": "warning",
                "job": "sglang-sentinel",
                "instance": f"127.0.0.1:{outlier.port}",
                "unit": f"docker:{CONTAINER}",
                "model": "Qwen3-8B",
                "tp_size": "2",
                "gpu": GPU,
            }
        ]
        assert (
            prom_query(base, 'ALERTS{alertname="SGLangCapacityBelowPeers",alertstate="pending"}')
            == []
        )
        [median] = (
            prom_query(base, "model_tp_gpu:sglang_sentinel_max_running_requests:median") or []
        )
        assert float(median["value"][1]) == sorted(capacity(n) for n in range(HOSTS))[HOSTS // 2]
        [count] = prom_query(base, "model_tp_gpu:sglang_sentinel_max_running_requests:count") or []
        assert count["value"][1] == str(HOSTS)

        # Baselines: 20 hosts on the fleet file's hash, one on its own; only that one is named.
        per_sha = {
            r["metric"]["sha256"]: r["value"][1]
            for r in prom_query(base, "model_tp_gpu_sha256:sglang_sentinel_baseline_info:count")
            or []
        }
        assert per_sha.pop(fleet_sha) == str(HOSTS - 1)
        assert list(per_sha.values()) == ["1"]
        drift = prom_query(base, 'ALERTS{alertname="SGLangBaselineDiffersFromFleet"}') or []
        assert [
            (a["metric"]["instance"], a["metric"]["unit"], a["metric"]["alertstate"]) for a in drift
        ] == [(f"127.0.0.1:{running[OWN_BASELINE].port}", UNIT, "pending")]
        for s in running:
            s.check_alive()
    finally:
        sentinels.stop_all()
    total_s = time.monotonic() - t0
    with capsys.disabled():
        print(
            f"\nfleet test: {HOSTS} sentinels; prepared (journals, scan, baseline import) "
            f"{prepared_s:.1f} s; sentinels serving {sentinels_s:.1f} s; Prometheus: all "
            f"targets up {all_up_s:.1f} s after ready, outlier alert firing {fired_s:.1f} s "
            f"after ready (rule has for: {LIVE_FOR}); total {total_s:.1f} s"
        )
