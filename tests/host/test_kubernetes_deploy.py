"""deploy/kubernetes/: every manifest valid against the Kubernetes schemas (kubernetes-validate;
the PodMonitor and PrometheusRule against the Prometheus Operator's CRDs, crdschema), the
PodMonitor scraping the DaemonSet's pods on their metrics port, the DaemonSet's privileges minimal, the PrometheusRule equal to the shipped rule files, the
ConfigMap's config loadable, and the README's Kubernetes section naming these files."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import crdschema
import kubernetes_validate
import pytest
import yaml

from sglang_sentinel.config import load_config
from sglang_sentinel.model import parse_selector
from tools import prometheusrule as script

REPO = Path(__file__).resolve().parents[2]
KUBE = REPO / "deploy" / "kubernetes"
K8S_VERSION = "1.31.0"  # the oldest minor still supported upstream when this was written


def kustomization() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((KUBE / "kustomization.yaml").read_text())
    return doc


def manifests() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for name in kustomization()["resources"]:
        for doc in yaml.safe_load_all((KUBE / name).read_text()):
            out.append((name, doc))
    return out


def test_kustomization_lists_every_manifest_of_the_directory() -> None:
    k = kustomization()
    listed = set(k["resources"]) | {f for g in k["configMapGenerator"] for f in g["files"]}
    present = {p.name for p in KUBE.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == present


@pytest.mark.parametrize("name", kustomization()["resources"])
def test_manifest_is_valid_against_the_kubernetes_schemas(name: str) -> None:
    for doc in yaml.safe_load_all((KUBE / name).read_text()):
        if doc["apiVersion"] in crdschema.API_VERSIONS:  # not in the core schemas
            assert crdschema.problems(doc) == []
        else:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_validation_catches_a_wrong_field() -> None:
    """The check can fail: a misspelt field in the DaemonSet is refused."""
    (ds,) = [d for _, d in manifests() if d["kind"] == "DaemonSet"]
    ds["spec"]["template"]["spec"]["containers"][0]["securityContexts"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(ds, K8S_VERSION, strict=True)


def test_podmonitor_scrapes_the_daemonsets_pods_on_their_metrics_port() -> None:
    """Its selector matches the pod template's labels (kustomize's `labels` leave templates
    alone), each endpoint's port names a container port, and its path is the one served."""
    (ds,) = [d for _, d in manifests() if d["kind"] == "DaemonSet"]
    (pm,) = [d for _, d in manifests() if d["kind"] == "PodMonitor"]
    template = ds["spec"]["template"]
    assert pm["spec"]["selector"] == {"matchLabels": {"app.kubernetes.io/name": "sglang-sentinel"}}
    assert pm["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
    ports = {p["name"]: p for c in template["spec"]["containers"] for p in c.get("ports", [])}
    assert [e["port"] for e in pm["spec"]["podMetricsEndpoints"]] == ["metrics"]
    assert (
        ports["metrics"]["containerPort"]
        == load_config(KUBE / "config.yaml", required=True, environ={}).listen.port
    )
    assert [e["path"] for e in pm["spec"]["podMetricsEndpoints"]] == ["/metrics"]
    assert "namespaceSelector" not in pm["spec"]  # its own namespace: the DaemonSet's


def test_daemonset_privileges_mounts_and_resources() -> None:
    (ds,) = [d for _, d in manifests() if d["kind"] == "DaemonSet"]
    pod = ds["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    sc = container["securityContext"]
    assert sc["capabilities"]["drop"] == ["ALL"] and "add" not in sc["capabilities"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False and sc["privileged"] is False
    assert pod["automountServiceAccountToken"] is False
    assert "hostNetwork" not in pod and "hostPID" not in pod
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    # Host paths: the pod logs read-only, the state directory the only writable one.
    host = {name: v["hostPath"]["path"] for name, v in volumes.items() if "hostPath" in v}
    assert host == {"pod-logs": "/var/log/pods", "state": "/var/lib/sglang-sentinel"}
    assert mounts["pod-logs"]["readOnly"] is True
    assert mounts["config"]["readOnly"] is True
    assert "readOnly" not in mounts["state"]
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}
    assert "memory" in container["resources"]["limits"]


def test_configmap_config_loads_and_names_the_mounted_paths(tmp_path: Path) -> None:
    config = load_config(KUBE / "config.yaml", required=True, environ={})
    assert config.units == ()
    assert str(config.kubernetes.pod_logs) == "/var/log/pods"
    assert str(config.state_dir) == "/var/lib/sglang-sentinel"
    assert config.listen.port == 19110
    for pod in config.kubernetes.pods:
        parse_selector(pod)
    (ds,) = [d for _, d in manifests() if d["kind"] == "DaemonSet"]
    args = ds["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--config") + 1] == "/etc/sglang-sentinel/config.yaml"


def test_prometheusrule_is_the_shipped_rule_files() -> None:

    assert (KUBE / "prometheusrule.yaml").read_text() == script.render()
    assert script.main(["--check"]) == 0
    rule = yaml.safe_load((KUBE / "prometheusrule.yaml").read_text())
    shipped = [
        g
        for f in ("sglang-sentinel-alerts.yml", "sglang-sentinel-fleet.yml")
        for g in yaml.safe_load((REPO / "deploy" / "prometheus" / f).read_text())["groups"]
    ]
    assert rule["spec"]["groups"] == shipped


def test_readme_kubernetes_section_names_these_manifests() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Kubernetes", 1)[1].split("\n## ", 1)[0]
    assert "kubectl apply -k deploy/kubernetes" in section
    for name in re.findall(r"deploy/kubernetes/([\w.-]+\.yaml)", section):
        assert (KUBE / name).is_file(), name
