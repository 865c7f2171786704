"""Prometheus Operator objects (PodMonitor, PrometheusRule) checked as the API server checks them:
against the served version's openAPIV3Schema of the CRD vendored in tests/support/crds/ (its
README names the source), with the fields the API server would drop refused too.

kubernetes-validate has no schema for custom resources, and a CRD's structural schema does not
set `additionalProperties: false`: a misspelt `podMetricsEndpoint` passes jsonschema alone, and
the API server prunes it (DROPPED). The pruning walk (_prune) reports it, as the API server
prunes before it validates."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import re2
import yaml

VENDORED = Path(__file__).resolve().parent / "crds"
FILES = {
    "PodMonitor": "monitoring.coreos.com_podmonitors.yaml",
    "PrometheusRule": "monitoring.coreos.com_prometheusrules.yaml",
}
API_VERSIONS = frozenset({"monitoring.coreos.com/v1"})
K8S_VERSION = "1.31.0"  # for metadata (ObjectMeta), as tests/host/test_kubernetes_deploy.py
# An unknown field of a custom resource is not in its stored object: the API server refuses it
# when the client asks for strict field validation (kubectl's default since 1.25), and otherwise
# prunes it with at most a warning (Helm, GitOps controllers, `kubectl --validate=false`).
DROPPED = "refused by strict field validation, else pruned (dropped) by the API server"


class CRDValidationError(Exception):
    """The object is not what the API server would store as written; one problem a line."""


def _re2_pattern(
    validator: Any, pattern: str, instance: Any, schema: dict[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    # The API server matches `pattern` with Go's regexp (RE2 syntax): `^(?i)(abort|warn)?$`
    # (PrometheusRule's partial_response_strategy) is valid there and an error for Python's re.
    if isinstance(instance, str) and not re2.search(pattern, instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


# OpenAPI v3's schema object is JSON Schema draft 4's vocabulary (types, properties, items,
# required, enum, pattern, minimum, anyOf...); the x-kubernetes-* extensions are ignored by it
# and handled in _prune.
_Validator = jsonschema.validators.extend(jsonschema.Draft4Validator, {"pattern": _re2_pattern})


@cache
def schema(api_version: str, kind: str) -> dict[str, Any]:
    """The openAPIV3Schema of the version the vendored CRD serves for api_version and kind."""
    if kind not in FILES:
        raise CRDValidationError(f"{api_version} {kind}: no CRD vendored for this kind")
    crd = yaml.safe_load((VENDORED / FILES[kind]).read_text(encoding="utf-8"))
    group = crd["spec"]["group"]
    assert crd["spec"]["names"]["kind"] == kind, FILES[kind]
    for version in crd["spec"]["versions"]:
        if f"{group}/{version['name']}" == api_version and version["served"]:
            found: dict[str, Any] = version["schema"]["openAPIV3Schema"]
            return found
    raise CRDValidationError(f"{api_version} {kind}: the vendored CRD serves no such version")


def _where(path: tuple[str | int, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path) or "."


def _prune(value: Any, node: dict[str, Any], path: tuple[str | int, ...], out: list[str]) -> Any:
    """What the API server keeps of value, as its pruning does before it validates: no unknown
    field, no null where the schema is not nullable; each drop, and each duplicate in a list of
    type map or set, appended to out."""
    if isinstance(value, dict):
        if node.get("x-kubernetes-preserve-unknown-fields"):
            return value  # kept as written (none of the vendored CRDs has one)
        # A field is kept when `properties` names it or `additionalProperties` (a map's
        # values) has a schema for it; an object with neither keeps nothing.
        properties: dict[str, Any] = node.get("properties", {})
        extra = node.get("additionalProperties")
        kept = {}
        for key, item in value.items():
            here = (*path, key)
            sub = properties.get(key, extra if isinstance(extra, dict) else None)
            if path == () and key == "metadata":
                kept[key] = item  # ObjectMeta: checked against the core schemas (problems)
            elif sub is None:
                out.append(f"{_where(here)}: unknown field, {DROPPED}")
            elif item is None and not sub.get("nullable"):
                out.append(f"{_where(here)}: null, pruned as if it were not written")
            else:
                kept[key] = _prune(item, sub, here, out)
        return kept
    if isinstance(value, list) and isinstance(node.get("items"), dict):
        kind = node.get("x-kubernetes-list-type")
        seen: set[str] = set()
        for i, item in enumerate(value):
            if kind == "map" and isinstance(item, dict):
                key = repr([item.get(k) for k in node.get("x-kubernetes-list-map-keys", [])])
            else:
                key = repr(item) if kind == "set" else ""
            if key and key in seen:
                out.append(f"{_where((*path, i))}: duplicate {key} in a list of type {kind}")
            seen.add(key)
        return [_prune(item, node["items"], (*path, i), out) for i, item in enumerate(value)]
    return value


def problems(doc: dict[str, Any]) -> list[str]:
    """Every reason the API server would refuse doc or not keep it as written; [] when none."""
    api_version, kind = doc.get("apiVersion", ""), doc.get("kind", "")
    name = f"{kind} {(doc.get('metadata') or {}).get('name', '?')}"
    try:
        found = schema(api_version, kind)
    except CRDValidationError as e:
        return [str(e)]
    dropped: list[str] = []
    kept = _prune(doc, found, (), dropped)
    errors = sorted(_Validator(found).iter_errors(kept), key=lambda e: list(map(str, e.path)))
    out = [f"{name}: {_where(tuple(e.absolute_path))}: {e.message}" for e in errors]
    out += [f"{name}: {p}" for p in dropped]
    # The CRD's schema says only `metadata: {type: object}`; the API server checks it as the
    # ObjectMeta of every object, which a ConfigMap's metadata is in the core schemas.
    meta = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": doc.get("metadata")}
    try:
        kubernetes_validate.validate(meta, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        out.append(f"{name}: {_where(tuple(e.absolute_path))}: {e.message}")
    return out


def validate(doc: dict[str, Any]) -> None:
    """Raise CRDValidationError naming every problem of doc (problems), or return."""
    found = problems(doc)
    if found:
        raise CRDValidationError("\n".join(found))
