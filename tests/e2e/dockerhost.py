"""Docker in the booted root: Debian's docker.io under systemd, read by the installed sentinel.

Two steps of the journey (journey.py runs them while the sentinel is installed):
- Docker's journald log driver: a container started with `--log-driver journald` prints a
  stand-in SGLang startup; journald (the root's own, under PID 1) stores it with the fields
  dockerd's driver and journald add, and the sentinel records it as `docker:NAME`, a restart as
  a second start.
- The Docker-host drop-in (deploy/dropins/docker-host.conf, installed by the
  README's `docker-host` block): without it the shipped unit cannot list Docker's containers;
  with it the sentinel reads a json-file container's log. `systemd-analyze security` before and
  after is reported.

dockerd runs with --iptables=false --ip6tables=false --bridge=none --storage-driver=vfs (a
docker.service drop-in sets DOCKER_OPTS, which Debian's unit passes): the container shares the host's
network namespace, so dockerd must not touch its bridges or firewall. The image is `docker
import`ed from the root's static busybox; nothing comes from a registry. At the end docker,
its socket and containerd are stopped and disabled, so the later steps (and `make test`'s own
dockerd) find no engine running.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import TYPE_CHECKING

import readme_blocks
from probes import JourneyError, wait_until

if TYPE_CHECKING:
    from journey import Journey

CLONE = "/root/sglang-sentinel"  # journey.CLONE (imported from here would be circular)
SERVICE = "sglang-sentinel.service"
IMAGE = "sentinel-e2e-busybox:1"
DOCKER_OPTS = "--iptables=false --ip6tables=false --bridge=none --storage-driver=vfs"
SECRET = "sk-EXAMPLE-docker-not-a-real-key"
# One SGLang start in busybox sh: a server_args line past 16 KiB (so Docker splits it: 6000
# cuda_graph_bs values), the summary with max_running_requests 128 - 32 * (earlier starts of
# this container: /count survives a restart), and the ready line.
START_SH = f"""n=$(cat /count 2>/dev/null || echo 0); echo $((n + 1)) > /count
mrr=$((128 - 32 * n))
bs=$(seq -s ', ' 0 5999)
echo "[2026-01-01 10:00:01] server_args=ServerArgs(model_path='/models/Qwen3-8B', tp_size=2, api_key='{SECRET}', cuda_graph_bs=[$bs], attention_backend='fa3', dp_size=1)" >&2
echo "[2026-01-01 10:00:50 TP0] max_total_num_tokens=400000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=$mrr, context_len=40960, available_gpu_mem=20.00 GB" >&2
echo "[2026-01-01 10:00:55] The server is fired up and ready to roll!" >&2
"""
EXPOSURE = re.compile(r"Overall exposure level for \S+: (\d+\.\d+)")


def install_docker(j: Journey) -> str:
    """docker.io and busybox-static from the archive, dockerd started with DOCKER_OPTS."""
    # Debian's docker.service runs `dockerd -H fd:// ... $DOCKER_OPTS`. The drop-in is written
    # before the package: its postinst would otherwise start dockerd with a bridge, and
    # policy-rc.d keeps apt from starting anything; systemctl starts it below, as configured.
    j.sh(
        "mkdir -p /etc/systemd/system/docker.service.d\n"
        f"printf '[Service]\\nEnvironment=\"DOCKER_OPTS={DOCKER_OPTS}\"\\n' "
        "> /etc/systemd/system/docker.service.d/e2e.conf\n"
        "printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d\n"
        "trap 'rm -f /usr/sbin/policy-rc.d' EXIT\n"
        # Debian 13 moved the client to docker-cli (a Recommends of docker.io); 12 has none.
        "cli=$(apt-cache show docker-cli >/dev/null 2>&1 && echo docker-cli || true)\n"
        "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "
        "docker.io $cli busybox-static\n"
        "systemctl daemon-reload",
        timeout=600,
    )
    j.sh("systemctl restart containerd.service docker.socket docker.service", timeout=120)
    version = j.sh("docker version --format '{{.Server.Version}}'").strip()
    cmdline = j.sh("tr '\\0' ' ' < /proc/$(systemctl show -p MainPID --value docker)/cmdline")
    if DOCKER_OPTS not in cmdline:
        raise JourneyError(f"dockerd runs as {cmdline!r}, without {DOCKER_OPTS}")
    j.sh(
        'set -e; d=$(mktemp -d); mkdir "$d/bin"; cp /bin/busybox "$d/bin/"; '
        'ln -s busybox "$d/bin/sh"\n'
        f"cat > \"$d/start.sh\" <<'EOF'\n{START_SH}EOF\n"
        f'tar -C "$d" -c . | docker import - {IMAGE} >/dev/null; rm -r "$d"'
    )
    return version


def restart_sentinel(j: Journey, targets: list[str]) -> int:
    """Restart the sentinel; its PID once STATUS names every target (set after the first
    drain, so by then it has read everything there is to read)."""
    j.sh(f"systemctl restart {SERVICE}")
    pid = j.main_pid()

    def named_all() -> bool:
        status = j.show(SERVICE, "StatusText")
        return all(f"{t}: " in status for t in targets)

    wait_until(named_all, 15, f"STATUS naming {targets} (last {j.show(SERVICE, 'StatusText')!r})")
    return pid


def set_containers(j: Journey, names: list[str]) -> None:
    j.sh(
        f"sed -i 's/^containers: .*/containers: [{', '.join(names)}]/' "
        "/etc/sglang-sentinel/config.yaml\n"
        f"grep -qx 'containers: \\[{', '.join(names)}\\]' /etc/sglang-sentinel/config.yaml"
    )


def container_startups(j: Journey, name: str) -> list[tuple[str, object]]:
    """(outcome, max_running_requests) of each recorded startup of docker:NAME."""
    out = j.sh(f"sentinel startups --unit docker:{name} --json")
    if SECRET in out:
        raise JourneyError(f"the container's api_key reached `sentinel startups` for {name}")
    records = json.loads(out)["startups"]
    return [(str(r["outcome"]), r["facts"].get("max_running_requests")) for r in records]


def run_container(j: Journey, name: str, driver: str) -> None:
    """Run the stand-in attached: it returns once its lines are written."""
    j.sh(
        f"docker run --name {name} --network none --log-driver {driver} {IMAGE} /bin/sh /start.sh",
        timeout=120,
    )


def exposure(j: Journey) -> float:
    out = j.sh(f"systemd-analyze security --no-pager {SERVICE}")
    match = EXPOSURE.search(out)
    if match is None:
        raise JourneyError(f"no exposure line in systemd-analyze security:\n{out[-1500:]}")
    return float(match.group(1))


def enabled() -> bool:
    """E2E_DOCKER=0 leaves the Docker steps out (and machine.py the nspawn options for them)."""
    return os.environ.get("E2E_DOCKER", "1") != "0"


def run(j: Journey) -> None:
    """The two Docker steps, then docker stopped and disabled."""
    suite = j.machine.name
    journald_name, files_name = f"sgl-journald-{suite}", f"sgl-files-{suite}"
    with j.step("docker.io under systemd: journald log driver -> docker:NAME") as s:
        start = time.monotonic()
        version = install_docker(j)
        install_s = time.monotonic() - start
        set_containers(j, [journald_name])
        restart_sentinel(j, [j.unit, f"docker:{journald_name}"])
        start = time.monotonic()
        run_container(j, journald_name, "journald")
        j.wait_metric(
            "sglang_sentinel_startups_total", 1, 10,
            unit=f"docker:{journald_name}", outcome="ready",
        )  # fmt: skip
        seen_s = time.monotonic() - start
        j.sh(f"docker start -a {journald_name}", timeout=120)  # a restart: a second start
        j.wait_metric(
            "sglang_sentinel_regression", 1, 10,
            unit=f"docker:{journald_name}", check="max_running_requests_drop",
            severity="critical",
        )  # fmt: skip
        got = container_startups(j, journald_name)
        if got != [("ready", 128), ("ready", 96)]:
            raise JourneyError(f"docker:{journald_name} startups {got}")
        fields = journal_fields(j, journald_name)
        text, _ = j.scrape()
        if SECRET in text:
            raise JourneyError("the container's api_key reached /metrics")
        s.detail = (
            f"docker {version}, apt-get install {install_s:.1f} s; 2 starts recorded (128, 96: "
            f"max_running_requests_drop), the first {seen_s:.2f} s after docker run; {fields}"
        )

    with j.step("Docker-host drop-in: json-file log under /var/lib/docker, exposure") as s:
        before = exposure(j)
        run_container(j, files_name, "json-file")
        targets = [j.unit, f"docker:{journald_name}", f"docker:{files_name}"]
        set_containers(j, [journald_name, files_name])
        pid = restart_sentinel(j, targets)
        # The shipped unit alone: the first drain is over and nothing of the file was read;
        # the sentinel said why, at start.
        status = j.show(SERVICE, "StatusText")
        if f"docker:{files_name}: no startup yet" not in status:
            raise JourneyError(f"without the drop-in the json-file was read? STATUS {status!r}")
        warned = j.sentinel_events("log_directory_unreadable", pid, priority="warning")
        if len(warned) != 1 or '"directory": "/var/lib/docker"' not in warned[0]:
            raise JourneyError(f"log_directory_unreadable without the drop-in: {warned}")
        cid = j.sh(f"docker inspect -f '{{{{.Id}}}}' {files_name}").strip()
        modes = (
            j.sh(
                f"cd /var/lib/docker/containers && stat -c '%a %U:%G %n' . {cid} "
                f"{cid}/config.v2.json {cid}/{cid}-json.log"
            )
            .replace(cid, "ID")
            .strip()
            .split("\n")
        )
        start = time.monotonic()
        text = readme_blocks.blocks()["docker-host"]
        j.machine.sh(f"set -euxo pipefail\ncd {CLONE}\n{text}", timeout=120)
        j.wait_metric(
            "sglang_sentinel_startups_total", 1, 15, unit=f"docker:{files_name}", outcome="ready"
        )
        seen_s = time.monotonic() - start
        got = container_startups(j, files_name)
        if got != [("ready", 128)]:
            raise JourneyError(f"docker:{files_name} startups {got}")
        # The journald one is still there, read once (not again after the restarts).
        if container_startups(j, journald_name) != [("ready", 128), ("ready", 96)]:
            raise JourneyError(f"docker:{journald_name} changed after the drop-in")
        after = exposure(j)
        pid = j.main_pid()
        if j.sentinel_events("log_directory_unreadable", pid):
            raise JourneyError("log_directory_unreadable with the drop-in")
        # What the capability can reach, from the service's own mount namespace.
        seen = j.sh(
            f"nsenter -t {pid} -m ls -A /var/lib/docker; "
            f"nsenter -t {pid} -m stat -c '%a %s' /etc/shadow"
        ).split()
        if seen != ["containers", "0", "0"]:
            raise JourneyError(f"the service sees /var/lib/docker and /etc/shadow as {seen}")
        if not after > before:
            raise JourneyError(f"exposure {before} -> {after}: the capability should cost")
        s.detail = (
            f"without: log_directory_unreadable, STATUS 'no startup yet' ({'; '.join(modes)}); "
            "with the drop-in: "
            f"recorded {seen_s:.2f} s after the README block; the service sees only containers/ "
            f"of /var/lib/docker and an empty /etc/shadow; exposure {before} -> {after}"
        )

    with j.step("docker stopped and disabled") as s:
        j.sh(f"docker rm -f {journald_name} {files_name} >/dev/null")
        j.sh(
            "systemctl disable --now docker.service docker.socket containerd.service 2>/dev/null\n"
            "rm -rf /etc/systemd/system/docker.service.d /run/containerd/containerd.sock\n"
            "systemctl daemon-reload"
        )
        running = j.sh(
            "systemctl is-active docker.service docker.socket containerd.service", check=False
        ).split()
        if running != ["inactive"] * 3:
            raise JourneyError(f"docker units still {running}")
        s.detail = "docker.service, docker.socket, containerd.service inactive and disabled"


def journal_fields(j: Journey, name: str) -> str:
    """What the journal holds for the container: driver and trusted fields, as a summary."""
    out = j.sh(
        f"journalctl -o json CONTAINER_NAME={name} "
        "--output-fields=_SYSTEMD_UNIT,_COMM,_UID,_TRANSPORT,CONTAINER_LOG_EPOCH,"
        "CONTAINER_PARTIAL_MESSAGE,CONTAINER_ID_FULL"
    )
    entries = [json.loads(line) for line in out.splitlines() if line.strip()]
    senders = {(e.get("_SYSTEMD_UNIT"), e.get("_COMM"), e.get("_UID")) for e in entries}
    if senders != {("docker.service", "dockerd", "0")}:
        raise JourneyError(f"{name}'s lines came from {senders}")
    epochs = {e["CONTAINER_LOG_EPOCH"] for e in entries if "CONTAINER_LOG_EPOCH" in e}
    pieces = sum(1 for e in entries if e.get("CONTAINER_PARTIAL_MESSAGE") == "true")
    told = f"{len(epochs)} CONTAINER_LOG_EPOCHs" if epochs else "no CONTAINER_LOG_EPOCH"
    return f"{len(entries)} entries from dockerd in docker.service, {told}, {pieces} partial pieces"
