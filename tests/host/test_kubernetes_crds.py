"""tests/support/crdschema.py, the check of the PodMonitor and PrometheusRule against the
Prometheus Operator's vendored CRDs: the vendored files are the upstream ones its README names,
and a mutated copy of each shipped object is refused for exactly what is wrong with it (wrong
type, wrong pattern, a field the API server would prune, a duplicate list-map key, metadata)."""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import crdschema
import jsonschema
import pytest
import re2
import yaml

REPO = Path(__file__).resolve().parents[2]
KUBE = REPO / "deploy" / "kubernetes"
DROPPED = crdschema.DROPPED


def shipped(kind: str) -> dict[str, Any]:
    name = {"PodMonitor": "podmonitor.yaml", "PrometheusRule": "prometheusrule.yaml"}[kind]
    doc: dict[str, Any] = yaml.safe_load((KUBE / name).read_text())
    assert doc["kind"] == kind
    return doc


def test_vendored_crds_are_the_files_the_readme_names() -> None:
    """Byte for byte the upstream files: their sha256 as the README lists them."""
    readme = (crdschema.VENDORED / "README.md").read_text()
    listed = dict(
        (name, digest) for digest, name in re.findall(r"^\s*([0-9a-f]{64})  (\S+)$", readme, re.M)
    )
    assert sorted(listed) == sorted(crdschema.FILES.values())
    for name, digest in listed.items():
        assert hashlib.sha256((crdschema.VENDORED / name).read_bytes()).hexdigest() == digest
        assert f"/v0.93.0/example/prometheus-operator-crd/{name}" in readme


def _patterns(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["pattern"]] if isinstance(node.get("pattern"), str) else []
        return own + [p for v in node.values() for p in _patterns(v)]
    return [p for v in node for p in _patterns(v)] if isinstance(node, list) else []


@pytest.mark.parametrize("kind", sorted(crdschema.FILES))
def test_the_served_schema_is_a_draft4_schema_with_go_patterns(kind: str) -> None:
    """Valid against draft 4's meta-schema, its patterns checked as RE2 (jsonschema's
    check_schema would compile them with Python's re, which refuses `^(?i)...`)."""
    found = crdschema.schema("monitoring.coreos.com/v1", kind)
    meta = jsonschema.Draft4Validator(jsonschema.Draft4Validator.META_SCHEMA)
    assert list(meta.iter_errors(found)) == []
    patterns = _patterns(found)
    assert patterns
    for pattern in patterns:
        re2.compile(pattern)


def test_jsonschema_alone_passes_a_misspelt_field() -> None:
    """Why the pruning walk: the structural schema allows unknown fields, so only it finds one."""
    doc = shipped("PodMonitor")
    doc["spec"]["podMetricsEndpoint"] = doc["spec"].pop("podMetricsEndpoints")
    found = crdschema.schema("monitoring.coreos.com/v1", "PodMonitor")
    assert list(jsonschema.Draft4Validator(found).iter_errors(doc)) == []
    assert crdschema.problems(doc) == [
        f"PodMonitor sglang-sentinel: .spec.podMetricsEndpoint: unknown field, {DROPPED}"
    ]


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation: the field at a dotted path (list indexes as numbers) set to value."""

    def mutate(doc: dict[str, Any]) -> None:
        *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        node: Any = doc
        for p in parents:
            node = node[p]
        node[last] = value

    return mutate


PM = "PodMonitor sglang-sentinel: "
PR = "PrometheusRule sglang-sentinel: "
MUTATIONS: dict[str, tuple[str, Callable[[dict[str, Any]], None], list[str]]] = {
    "port-as-number": (
        "PodMonitor",
        _set("spec.podMetricsEndpoints.0.port", 19110),
        [PM + ".spec.podMetricsEndpoints[0].port: 19110 is not of type 'string'"],
    ),
    "port-number-out-of-range": (
        "PodMonitor",
        _set("spec.podMetricsEndpoints.0.portNumber", 70000),
        [
            PM
            + ".spec.podMetricsEndpoints[0].portNumber: 70000 is greater than the maximum of 65535"
        ],
    ),
    "interval-not-a-duration": (
        "PodMonitor",
        _set("spec.podMetricsEndpoints.0.interval", "30 s"),
        [
            PM + ".spec.podMetricsEndpoints[0].interval: '30 s' does not match "
            "'^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$'"
        ],
    ),
    "misspelt-endpoint-field": (
        "PodMonitor",
        _set("spec.podMetricsEndpoints.0.intervall", "30s"),
        [PM + f".spec.podMetricsEndpoints[0].intervall: unknown field, {DROPPED}"],
    ),
    "null-field": (
        "PodMonitor",
        _set("spec.podMetricsEndpoints.0.path", None),
        [PM + ".spec.podMetricsEndpoints[0].path: null, pruned as if it were not written"],
    ),
    "selector-missing": (
        "PodMonitor",
        lambda d: d["spec"].pop("selector"),
        [PM + ".spec: 'selector' is a required property"],
    ),
    "field-under-an-object-without-properties": (
        "PodMonitor",
        _set("spec.selector.matchLabel", {"app": "x"}),
        [PM + f".spec.selector.matchLabel: unknown field, {DROPPED}"],
    ),
    "label-value-not-a-string": (
        "PodMonitor",
        _set("spec.selector.matchLabels.tier", 1),
        [PM + ".spec.selector.matchLabels.tier: 1 is not of type 'string'"],
    ),
    "metadata-field-misspelt": (
        "PodMonitor",
        _set("metadata.label", {"release": "kps"}),
        [PM + ".metadata: Additional properties are not allowed ('label' was unexpected)"],
    ),
    "duplicate-group": (
        "PrometheusRule",
        lambda d: d["spec"]["groups"].append(copy.deepcopy(d["spec"]["groups"][0])),
        [PR + ".spec.groups[2]: duplicate ['sglang-sentinel'] in a list of type map"],
    ),
    "rule-without-expr": (
        "PrometheusRule",
        lambda d: d["spec"]["groups"][0]["rules"][0].pop("expr"),
        [PR + ".spec.groups[0].rules[0]: 'expr' is a required property"],
    ),
    "misspelt-rule-field": (
        "PrometheusRule",
        lambda d: d["spec"]["groups"][0]["rules"][0].update(annotation={"summary": "x"}),
        [PR + f".spec.groups[0].rules[0].annotation: unknown field, {DROPPED}"],
    ),
    "for-not-a-duration": (
        "PrometheusRule",
        _set("spec.groups.0.rules.0.for", "1 minute"),
        [
            PR + ".spec.groups[0].rules[0].for: '1 minute' does not match "
            "'^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$'"
        ],
    ),
    "partial-response-strategy-wrong": (
        "PrometheusRule",
        _set("spec.groups.0.partial_response_strategy", "retry"),
        [
            PR + ".spec.groups[0].partial_response_strategy: 'retry' does not match "
            "'^(?i)(abort|warn)?$'"
        ],
    ),
    "not-a-served-version": (
        "PrometheusRule",
        _set("apiVersion", "monitoring.coreos.com/v1beta1"),
        ["monitoring.coreos.com/v1beta1 PrometheusRule: the vendored CRD serves no such version"],
    ),
}


@pytest.mark.parametrize("case", sorted(MUTATIONS))
def test_a_mutated_copy_is_refused_for_what_is_wrong(case: str) -> None:
    kind, mutate, expected = MUTATIONS[case]
    doc = shipped(kind)
    assert crdschema.problems(doc) == []
    mutate(doc)
    assert crdschema.problems(doc) == expected
    with pytest.raises(crdschema.CRDValidationError):
        crdschema.validate(doc)


def test_patterns_are_go_regexps() -> None:
    """`(?i)` after `^` is RE2 (the API server's Go regexp) and an error for Python's re, which
    stock jsonschema uses: a valid strategy in any case passes."""
    doc = shipped("PrometheusRule")
    doc["spec"]["groups"][0]["partial_response_strategy"] = "WARN"
    assert crdschema.problems(doc) == []
