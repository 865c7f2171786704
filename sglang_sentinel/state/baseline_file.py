"""A pinned baseline as a file: export, content hash, import checks.

Config management hands a fleet one known-good baseline: `sentinel baseline --export FILE` on
the host where it was pinned, `--import FILE` on the others. The file is JSON; its `sha256` is
the hash of the canonical JSON of the `baseline` part only (model, TP size and the startup's
facts, flags and redacted server_args), so the same startup hashes the same wherever it is
exported or imported, and `sglang_sentinel_baseline_info{sha256}` tells which hosts run which.
Provenance (exporting unit and host, time, GPU) is beside it, not in the hash.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..errors import UsageError
from ..model import StartupRecord
from ..redact import redact_value
from ..yamlfile import DuplicateKeyError, FileTooLarge, load_json, read_text
from .codec import plain, record_from_doc

FORMAT: Final = "sglang-sentinel-baseline"
VERSION: Final = 1
# The unit an imported baseline is stored under: never watched, so it is never "the latest
# startup" of anything; the watched unit only points at it as its pinned baseline.
IMPORTED_PREFIX: Final = "imported:"


class BaselineFileError(UsageError):
    """A baseline file that cannot be imported here; the message says why and what to do."""


def model_label(record: StartupRecord) -> str:
    """The model a startup served: served_model_name, else the model path's last component."""
    served = record.server_args.get("served_model_name") if record.server_args else None
    if isinstance(served, str) and served:
        return served[:100]
    path = record.facts.get("model_path")
    if isinstance(path, str) and path:
        return path.rstrip("/").rsplit("/", 1)[-1][:100]
    return ""


def tp_label(record: StartupRecord) -> str:
    tp = record.facts.get("tp_size")
    return "" if tp is None else str(tp)


def content(record: StartupRecord) -> dict[str, Any]:
    """The hashed part of a baseline: what the startup was, not where it came from."""
    # Redacted again on the way out: a record from an older version must not leak either.
    return {
        "model": model_label(record),
        "tp_size": tp_label(record),
        "started_at": record.started_at,
        "ready_at": record.ready_at,
        "facts": plain(redact_value("facts", dict(record.facts))),
        "launch_flags": plain(redact_value("launch_flags", list(record.launch_flags))),
        "server_args": plain(redact_value("server_args", dict(record.server_args))),
    }


def content_sha256(body: Mapping[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def record_sha256(record: StartupRecord) -> str:
    """The sha256 a baseline file of this startup carries (and baseline_info exports)."""
    return content_sha256(content(record))


def export_document(record: StartupRecord, *, unit: str, gpu: str) -> dict[str, Any]:
    body = content(record)
    return {
        "format": FORMAT,
        "version": VERSION,
        "sha256": content_sha256(body),
        "gpu": gpu,
        "exported_from": {
            "unit": unit,
            "invocation_id": record.invocation_id,
            "host": _hostname(),
            "exported_at": round(time.time(), 3),
        },
        "baseline": body,
    }


@dataclass(frozen=True, slots=True)
class BaselineFile:
    """A validated baseline file: its hash, GPU and the startup record it describes."""

    sha256: str
    gpu: str
    model: str
    tp_size: str
    record: StartupRecord


def read_document(path: Path) -> BaselineFile:
    """Read and verify a baseline file; BaselineFileError says what is wrong with it."""
    try:
        doc = load_json(read_text(path))
    except FileTooLarge as exc:
        raise BaselineFileError(f"{path}: {exc}") from exc
    except OSError as exc:
        raise BaselineFileError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except (UnicodeDecodeError, json.JSONDecodeError, DuplicateKeyError) as exc:
        raise BaselineFileError(f"{path}: not a baseline file (invalid JSON: {exc})") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise BaselineFileError(
            f'{path}: not a baseline file (no "format": "{FORMAT}"); '
            "make one with `sentinel baseline --export FILE`"
        )
    if doc.get("version") != VERSION:
        raise BaselineFileError(
            f"{path}: baseline file version {doc.get('version')!r} is not supported "
            f"(this sentinel reads version {VERSION})"
        )
    body = doc.get("baseline")
    problems = _shape_problems(body)
    if problems:
        raise BaselineFileError(f"{path}: malformed baseline: {'; '.join(problems)}")
    assert isinstance(body, dict)
    sha = content_sha256(body)
    if doc.get("sha256") != sha:
        raise BaselineFileError(
            f"{path}: content does not match its sha256 (edited or damaged after export); "
            "export it again"
        )
    gpu = doc.get("gpu")
    record = record_from_doc(
        {
            "unit": IMPORTED_PREFIX + sha[:16],
            "invocation_id": sha[:32],
            "started_at": float(body["started_at"]),
            "ready_at": float(body["ready_at"]),
            "outcome": "ready",
            "facts": body["facts"],
            "launch_flags": body["launch_flags"],
            "server_args": body["server_args"],
        }
    )
    return BaselineFile(
        sha256=sha,
        gpu=gpu if isinstance(gpu, str) else "",
        model=str(body["model"]),
        tp_size=str(body["tp_size"]),
        record=record,
    )


def _shape_problems(body: Any) -> list[str]:
    if not isinstance(body, dict):
        return ['"baseline" must be an object']
    problems = []
    for key, kind in (
        ("model", str),
        ("tp_size", str),
        ("started_at", (int, float)),
        ("ready_at", (int, float)),
        ("facts", dict),
        ("launch_flags", list),
        ("server_args", dict),
    ):
        if not isinstance(body.get(key), kind):
            problems.append(f'"baseline.{key}" is missing or of the wrong type')
    return problems


def mismatches(
    file: BaselineFile, current: StartupRecord | None, *, unit: str, gpu: str
) -> list[str]:
    """Why this baseline does not fit `unit` here (empty: it fits)."""
    if current is None:
        return [
            f"no ready startup of {unit} is recorded to check the model and TP size against "
            "(import after its first startup)"
        ]
    out = []
    if model_label(current) != file.model:
        out.append(f"model differs: file {file.model!r}, {unit} runs {model_label(current)!r}")
    if tp_label(current) != file.tp_size:
        out.append(f"TP size differs: file {file.tp_size!r}, {unit} runs {tp_label(current)!r}")
    if gpu != file.gpu:
        out.append(f"GPU differs: file {file.gpu!r}, this host is {gpu!r} (config `gpu:`)")
    return out


def _hostname() -> str:
    # Imported here: every command loads this module through state/, only an export names the host.
    import socket

    return socket.gethostname()
