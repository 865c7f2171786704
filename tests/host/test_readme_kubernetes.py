"""The README's Kubernetes section, run as written: its marked blocks (`<!-- e2e: k8s-... -->`)
name the manifests tests/host/test_kubernetes_deploy.py validates, and run here where they can
(all but `kubectl apply`, which needs a cluster)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import crdschema
import kubernetes_validate
import yaml
from kubetools import kubectl
from logfiles import PodDir, sglang_start

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

import readme_blocks

REPO = Path(__file__).resolve().parents[2]
KUBE = REPO / "deploy" / "kubernetes"
K8S_VERSION = "1.31.0"  # as test_kubernetes_deploy.py
BLOCKS = ("k8s-config", "k8s-apply", "k8s-scan")
# SGLang's single-node manifest, sgl-project/sglang@0b082f52 docker/k8s-sglang-service.yaml: a
# Deployment and its one container, both named this, no namespace (so the one applied to).
SGLANG_WORKLOAD = "meta-llama-31-8b-instruct-sglang"
# A pod its ReplicaSet makes: `<deployment>-<pod-template-hash>-<suffix>`.
SGLANG_POD = SGLANG_WORKLOAD + "-6c9f7d5b8d-q2xzt"


def section() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    return readme.split("\n## Kubernetes\n", 1)[1].split("\n## ", 1)[0]


def k8s_blocks() -> dict[str, str]:
    found = readme_blocks.blocks(section())
    assert list(found) == list(BLOCKS)
    return found


def run_block(text: str, tmp_path: Path, **env: str) -> str:
    """One block through bash from the repository root, in a temporary directory of its own."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("NOTIFY_", "WATCHDOG_"))}
    environ.pop("SENTINEL_STATE_DIR", None)
    environ.update(TMPDIR=str(tmp_path), **env)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", text],
        cwd=REPO,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def sentinel_wrapper(tmp_path: Path) -> Path:
    wrapper = tmp_path / "bin" / "sentinel"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -m sglang_sentinel.cli "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def test_the_section_has_its_blocks_in_order() -> None:
    assert list(k8s_blocks()) == list(BLOCKS)


def test_the_config_block_picks_the_pods_of_sglangs_deployment(tmp_path: Path) -> None:
    """What the block shows is the shipped config's selector, and that config finds the pod
    SGLang's manifest makes (and no other Deployment's) under the kubelet's layout."""
    shown = run_block(k8s_blocks()["k8s-config"], tmp_path)
    selector = f"default/{SGLANG_WORKLOAD}/{SGLANG_WORKLOAD}"
    assert shown == f"  pods:\n    - {selector}\n"
    pods = tmp_path / "pods"
    ours = PodDir(pods, "default", SGLANG_POD, "0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f")
    sglang_start(lambda t: ours.line(SGLANG_WORKLOAD, 0, t), "2026-01-01", 48)
    other = PodDir(
        pods, "default", "other-6c9f7d5b8d-q2xzt", "1c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"
    )
    sglang_start(lambda t: other.line(SGLANG_WORKLOAD, 0, t), "2026-01-01", 12)
    wrapper = sentinel_wrapper(tmp_path)
    out = run_block(
        f"{wrapper} scan --config deploy/kubernetes/config.yaml --pod-logs {pods} "
        f"--state-dir {tmp_path / 'state'} --json",
        tmp_path,
    )
    doc = yaml.safe_load(out)  # JSON is YAML
    assert [
        (s["unit"], s["outcome"], s["facts"]["max_running_requests"]) for s in doc["startups"]
    ] == [(f"k8s:{selector}", "ready", 48)]


def test_the_apply_block_renders_the_validated_manifests(tmp_path: Path) -> None:
    """`kubectl kustomize` as the block has it; every object it prints is valid against the
    Kubernetes schemas, and `kubectl apply -k` names the same directory."""
    text = k8s_blocks()["k8s-apply"]
    render, apply = (shlex.split(line) for line in text.splitlines())
    assert render[:2] == ["kubectl", "kustomize"] and apply[:3] == ["kubectl", "apply", "-k"]
    assert (REPO / render[2]).resolve() == (REPO / apply[3]).resolve() == KUBE
    shown = run_block(
        text.splitlines()[0], tmp_path, PATH=f"{Path(kubectl()).parent}:{os.environ['PATH']}"
    )
    docs: list[dict[str, Any]] = list(yaml.safe_load_all(shown))
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(
        ["Namespace", "ConfigMap", "DaemonSet", "Service", "PodMonitor", "PrometheusRule"]
    )
    for doc in docs:
        assert doc["metadata"]["labels"]["app.kubernetes.io/name"] == "sglang-sentinel"
        if doc["apiVersion"] in crdschema.API_VERSIONS:  # not in the core schemas
            assert crdschema.problems(doc) == []
        else:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        if doc["kind"] == "Namespace":
            assert doc["metadata"]["name"] == "sglang-sentinel"
        else:
            assert doc["metadata"]["namespace"] == "sglang-sentinel"
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap"]
    (ds,) = [d for d in docs if d["kind"] == "DaemonSet"]
    assert cm["data"] == {"config.yaml": (KUBE / "config.yaml").read_text()}
    # The generated name (with its content hash) is the one the DaemonSet mounts.
    assert cm["metadata"]["name"].startswith("sglang-sentinel-config-")
    volumes = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == cm["metadata"]["name"]


def test_the_scan_block_reports_the_demo_pods(tmp_path: Path) -> None:
    text = k8s_blocks()["k8s-scan"]
    assert text.startswith(".venv/bin/sentinel scan ")
    out = run_block(
        text.replace(".venv/bin/sentinel", str(sentinel_wrapper(tmp_path)), 1), tmp_path
    )
    target = "k8s:default/sglang-qwen/sglang"
    headers = [line.split("  startup ")[0] for line in out.splitlines() if "  startup " in line]
    assert headers == [target, target]
    (second,) = [b for b in out.split("\n\n") if "vs previous ready startup" in b]
    assert "\n  CRITICAL  max_running_requests 48 → 26 (−46 %)\n" in second + "\n"
