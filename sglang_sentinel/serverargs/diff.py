"""Make two parsed `server_args` of any SGLang versions comparable, and list what changed.

SGLang renames and reshapes settings between releases (0.5.23 moved the CUDA-graph flags into a
nested `cuda_graph_config`), so a plain field-by-field diff across an upgrade would report a
removed flag and an added one where nothing changed. `RENAMES` maps each version's spelling of a
setting to one canonical name, `normalized_settings` reduces a parse to a small
version-independent dict, and `diff_server_args` lists what changed, reporting a renamed setting
as one change. Input is what serverargs.parse_server_args returns (already redacted).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal

# Nested dicts deeper than this are compared whole rather than leaf by leaf. The parser's
# serverargs.MAX_DEPTH (the same 32) already rejects deeper reprs; this bound covers mappings
# from elsewhere (stored records) without importing the parser, which imports this module.
_FLATTEN_DEPTH: Final = 32

Meaning = Literal["same", "enable", "disable", "backend"]


@dataclass(frozen=True, slots=True)
class Rename:
    """One version's spelling of a canonical setting and how its value maps to the canonical one.

    `meaning`: "same" (value as is), "enable" (True = on), "disable" (True = off), "backend"
    (a backend name; 'disabled'/'none'/'off' = off, any other name = on, None = not decided).
    """

    canonical: str
    meaning: Meaning
    versions: str


# Within one canonical setting the entries are in precedence order: the first spelling present
# with a decided value wins. 0.5.23's resolved `cuda_graph_config` comes before its raw flag,
# which is None unless the flag was given. Dotted names are paths into nested dicts.
RENAMES: Final[Mapping[str, Rename]] = MappingProxyType(
    {
        "cuda_graph_config.prefill.backend": Rename("piecewise_cuda_graph", "backend", "0.5.23"),
        "cuda_graph_backend_prefill": Rename("piecewise_cuda_graph", "backend", "0.5.23"),
        "disable_piecewise_cuda_graph": Rename(
            "piecewise_cuda_graph", "disable", "0.5.10rc0-0.5.22"
        ),
        "enable_piecewise_cuda_graph": Rename("piecewise_cuda_graph", "enable", "<=0.5.9"),
        "cuda_graph_config.decode.backend": Rename("cuda_graph", "backend", "0.5.23"),
        "cuda_graph_backend_decode": Rename("cuda_graph", "backend", "0.5.23"),
        "disable_cuda_graph": Rename("cuda_graph", "disable", "<=0.5.22"),
        "flashinfer_allreduce_fusion_backend": Rename(
            "flashinfer_allreduce_fusion", "backend", "0.5.23"
        ),
        "enable_flashinfer_allreduce_fusion": Rename(
            "flashinfer_allreduce_fusion", "enable", "<=0.5.22"
        ),
        "cuda_graph_max_bs_decode": Rename("cuda_graph_max_bs", "same", "0.5.23"),
        "cuda_graph_max_bs": Rename("cuda_graph_max_bs", "same", "<=0.5.22"),
        # The same spelling in every release; a switch all the same, so that the resolved
        # value is a fact and a check (0.5.23 turns it off for mamba with no log line).
        "disable_overlap_schedule": Rename("overlap_schedule", "disable", "all"),
    }
)
# The settings RENAMES spells per version that switch a feature on or off, with the words a
# person reads for each; normalized_settings reports them, compare's `<name>_disabled` checks
# watch all but the fusion.
SWITCHES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "piecewise_cuda_graph": "piecewise CUDA graph",
        "cuda_graph": "CUDA graph",
        "flashinfer_allreduce_fusion": "FlashInfer allreduce fusion",
        "overlap_schedule": "overlap scheduler",
    }
)
# Fields whose change between startups says nothing: SGLang draws a new seed every start.
NOISE_FIELDS: Final = frozenset({"random_seed"})
_OFF_BACKENDS: Final = frozenset({"disabled", "disable", "none", "off", "false", ""})
# Argparse aliases that could appear as names in a hand-built dict.
_ALIASES: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        "tp_size": ("tp_size", "tensor_parallel_size"),
        "dp_size": ("dp_size", "data_parallel_size"),
        "ep_size": ("ep_size", "expert_parallel_size"),
        "pp_size": ("pp_size", "pipeline_parallel_size"),
    }
)
_PLAIN_SETTINGS: Final = (
    "model_path",
    "served_model_name",
    "attention_backend",
    "chunked_prefill_size",
    "mem_fraction_static",
    "max_running_requests",
)
_MISSING: Final = object()


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One server_args field that differs between two startups; None stands for absent."""

    field: str
    old: Any
    new: Any
    note: str | None = None
    # The spelling the new side uses (a RENAMES key) when `field` is a canonical setting name.
    spelling: str | None = None


def canonical_field(name: str) -> str:
    """The version-independent name of a server_args field (itself unless it was renamed)."""
    rename = RENAMES.get(name)
    return rename.canonical if rename else name


def _members(canonical: str) -> tuple[str, ...]:
    return tuple(name for name, rename in RENAMES.items() if rename.canonical == canonical)


def _lookup(args: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path, or _MISSING; JSON-string dicts on the way are decoded."""
    node: Any = args
    for part in path.split("."):
        if isinstance(node, str) and node.lstrip().startswith("{"):
            try:
                node = json.loads(node)
            except (ValueError, RecursionError):
                return _MISSING
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _convert(meaning: Meaning, value: Any) -> Any:
    if value is None or meaning == "same":
        return value
    if meaning == "backend":
        if isinstance(value, bool):
            return value
        return str(value).strip().lower() not in _OFF_BACKENDS
    on = bool(value)
    return on if meaning == "enable" else not on


def _setting(args: Mapping[str, Any], canonical: str) -> tuple[Any, str | None]:
    """The canonical value of a renamed setting and the spelling it came from."""
    source: str | None = None
    for name in _members(canonical):
        raw = _lookup(args, name)
        if raw is _MISSING:
            continue
        value = _convert(RENAMES[name].meaning, raw)
        if value is not None:
            return value, name
        source = source or name
    return None, source


def switched_off_by(args: Mapping[str, Any], canonical: str) -> tuple[str, Any] | None:
    """The spelling (field or dotted path) and raw value that turned `canonical` off, if any.

    The one table of CUDA-graph switches across versions is RENAMES; compare uses this to say
    which setting turned a feature off and whether the command line asked for it.
    """
    for name in _members(canonical):
        raw = _lookup(args, name)
        if raw is not _MISSING and _convert(RENAMES[name].meaning, raw) is False:
            return name, raw
    return None


def flag_of(name: str) -> str:
    """The command-line flag that sets a server_args field; a nested one through its top field."""
    return "--" + name.split(".", 1)[0].replace("_", "-")


def switch_flags(canonical: str) -> tuple[str, ...]:
    """The command-line flags that can turn `canonical` off in any version.

    An `--enable-…` flag only ever turns a feature on (leaving it out is how it stays off), so
    it is not one of them; nested settings are set through their top-level field's flag.
    """
    flags = {flag_of(name) for name in _members(canonical) if RENAMES[name].meaning != "enable"}
    return tuple(sorted(flags))


def setting_flags(name: str) -> tuple[str, ...]:
    """The command-line flags that can have set server_args field `name` (a field or dotted path).

    The field's own flag first; for a setting RENAMES spells several ways, also the flags of
    its other spellings that can set its value either way: 0.5.23's
    `cuda_graph_config.prefill.backend` is set by `--cuda-graph-backend-prefill` as much as by
    `--cuda-graph-config`. An `--enable-…` spelling only ever turns the feature on, so it does
    not explain another spelling's value.
    """
    others = switch_flags(RENAMES[name].canonical) if name in RENAMES else ()
    return tuple(dict.fromkeys((flag_of(name), *others)))


def normalized_settings(args: Mapping[str, Any]) -> dict[str, Any]:
    """Reduce a parsed server_args of any SGLang version to a small version-independent dict."""
    out: dict[str, Any] = {}
    for canonical in SWITCHES:
        out[canonical] = _setting(args, canonical)[0]
    for name, spellings in _ALIASES.items():
        out[name] = next((args[s] for s in spellings if args.get(s) is not None), None)
    for name in _PLAIN_SETTINGS:
        out[name] = args.get(name)
    out["cuda_graph_max_bs"] = _setting(args, "cuda_graph_max_bs")[0]
    for name in ("moe_runner_backend", "kv_cache_dtype", "enable_multimodal"):
        out[name] = args.get(name)
    return out


def _flatten(args: Mapping[Any, Any], prefix: str = "", depth: int = 0) -> dict[str, Any]:
    # Nested plain dicts (0.5.23's cuda_graph_config) are diffed leaf by leaf so a change reads
    # `cuda_graph_config.decode.max_bs: 256 -> 512`; dataclass reprs stay whole.
    out: dict[str, Any] = {}
    for key, value in args.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and "__type__" not in value and depth < _FLATTEN_DEPTH:
            out.update(_flatten(value, f"{path}.", depth + 1))
        else:
            out[path] = value
    return out


def _same(a: Any, b: Any) -> bool:
    """Equality that tells True from 1 and treats NaN as equal to itself."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _rename_note(old_source: str | None, new_source: str | None) -> str:
    if old_source and new_source:
        return f"renamed {old_source} → {new_source}"
    return "field added" if new_source else "field removed"


def diff_server_args(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldChange]:
    """Fields changed, added or removed between two parsed server_args, sorted by field name.

    A setting spelled differently on the two sides (see RENAMES) is one change under its
    canonical name with canonical values (True = on). Fields unset (None or absent) on both
    sides and NOISE_FIELDS are left out.
    """
    old_flat = _flatten(old)
    new_flat = _flatten(new)
    changes: list[FieldChange] = []
    for canonical in dict.fromkeys(rename.canonical for rename in RENAMES.values()):
        members = _members(canonical)
        old_spellings = {name for name in members if _lookup(old, name) is not _MISSING}
        new_spellings = {name for name in members if _lookup(new, name) is not _MISSING}
        if old_spellings == new_spellings:
            continue  # same version family: the fields are compared one by one below
        for name in members:
            old_flat.pop(name, None)
            new_flat.pop(name, None)
        old_value, old_source = _setting(old, canonical)
        new_value, new_source = _setting(new, canonical)
        if (old_value is None and new_value is None) or _same(old_value, new_value):
            continue
        changes.append(
            FieldChange(
                canonical,
                old_value,
                new_value,
                _rename_note(old_source, new_source),
                spelling=new_source,
            )
        )
    for name in old_flat.keys() | new_flat.keys():
        if name in NOISE_FIELDS:
            continue
        old_value = old_flat.get(name, _MISSING)
        new_value = new_flat.get(name, _MISSING)
        old_unset = old_value is None or old_value is _MISSING
        new_unset = new_value is None or new_value is _MISSING
        if (old_unset and new_unset) or _same(old_value, new_value):
            continue
        note = None
        if old_value is _MISSING:
            note, old_value = "field added", None
        elif new_value is _MISSING:
            note, new_value = "field removed", None
        changes.append(FieldChange(name, old_value, new_value, note))
    changes.sort(key=lambda change: change.field)
    return changes


__all__ = [
    "NOISE_FIELDS",
    "RENAMES",
    "SWITCHES",
    "FieldChange",
    "Meaning",
    "Rename",
    "canonical_field",
    "diff_server_args",
    "flag_of",
    "normalized_settings",
    "setting_flags",
    "switch_flags",
    "switched_off_by",
]
