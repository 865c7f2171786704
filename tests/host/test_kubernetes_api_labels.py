"""deploy/kubernetes/api-labels/: the optional component behind `kubernetes.labels`, enabled as
kustomization.yaml's comment says, renders valid objects that grant only get/list/watch on
pods, give the pod its token and its node's name, and leave the default without either."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import crdschema
import kubernetes_validate
import yaml
from kubetools import kubectl

from sglang_sentinel.config import load_config
from sglang_sentinel.daemon.kubeapi import pod_labels_of

REPO = Path(__file__).resolve().parents[2]
KUBE = REPO / "deploy" / "kubernetes"
K8S_VERSION = "1.31.0"  # as test_kubernetes_deploy.py
COMMENTED = "# components:\n#   - api-labels\n"


def render(directory: Path) -> list[dict[str, Any]]:
    out = subprocess.run(
        [kubectl(), "kustomize", str(directory)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return list(yaml.safe_load_all(out.stdout))


def enabled(tmp_path: Path) -> Path:
    """A copy of deploy/kubernetes with the component's lines uncommented, as the comment says."""
    copy = tmp_path / "kubernetes"
    shutil.copytree(KUBE, copy)
    text = (copy / "kustomization.yaml").read_text()
    assert text.count(COMMENTED) == 1
    (copy / "kustomization.yaml").write_text(
        text.replace(COMMENTED, "components:\n  - api-labels\n")
    )
    return copy


def test_the_component_grants_pod_reads_only_and_gives_the_token_and_node(tmp_path: Path) -> None:
    docs = render(enabled(tmp_path))
    for doc in docs:
        if doc["apiVersion"] in crdschema.API_VERSIONS:  # not in the core schemas
            assert crdschema.problems(doc) == []
        else:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    by_kind = {d["kind"]: d for d in docs}
    assert sorted(by_kind) == sorted(
        ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap",
         "Service", "DaemonSet", "PodMonitor", "PrometheusRule"]
    )  # fmt: skip
    assert by_kind["ClusterRole"]["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
    ]
    binding = by_kind["ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == by_kind["ClusterRole"]["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "sglang-sentinel", "namespace": "sglang-sentinel"}
    ]
    assert by_kind["ServiceAccount"]["metadata"]["namespace"] == "sglang-sentinel"
    pod = by_kind["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "sglang-sentinel"
    assert pod["automountServiceAccountToken"] is True
    (container,) = pod["containers"]
    assert container["env"] == [
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
    ]
    # The rest of the container as without the component: no capability, nothing writable.
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_without_the_component_there_is_no_account_and_no_token(tmp_path: Path) -> None:
    docs = render(KUBE)
    assert not {"ServiceAccount", "ClusterRole", "ClusterRoleBinding"} & {d["kind"] for d in docs}
    (ds,) = [d for d in docs if d["kind"] == "DaemonSet"]
    pod = ds["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False and "serviceAccountName" not in pod


def test_the_shipped_config_with_labels_finds_the_api_in_the_components_pod(
    tmp_path: Path,
) -> None:
    """config.yaml plus `kubernetes.labels`, in the environment the component's pod has."""
    doc = yaml.safe_load((KUBE / "config.yaml").read_text())
    doc["kubernetes"]["labels"] = ["app", "leaderworkerset.sigs.k8s.io/worker-index"]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(doc))
    config = load_config(path, required=True, environ={})
    pod_env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    watcher = pod_labels_of(config.kubernetes, {**pod_env, "NODE_NAME": "gpu-node-1"})
    assert watcher is not None
    assert (watcher.endpoint.host, watcher.endpoint.port, watcher.endpoint.node) == (
        "10.96.0.1",
        443,
        "gpu-node-1",
    )
    assert watcher.names == ("label_app", "label_leaderworkerset_sigs_k8s_io_worker_index")
    assert pod_labels_of(load_config(KUBE / "config.yaml", environ={}).kubernetes, {}) is None
