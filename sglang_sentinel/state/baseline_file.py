"""A pinned baseline as a file: export, content hash, import checks.

Config management hands a fleet one known-good baseline: `sentinel baseline --export FILE` on
the host where it was pinned, `--import FILE` on the others. The file is JSON; its `sha256` is
the hash of the canonical JSON of the `baseline` part only (model, TP size and the startup's
facts, flags and redacted server_args), so the same startup hashes the same wherever it is
exported or imported, and `sglang_sentinel_baseline_info{sha256}` tells which hosts run which.
Provenance (exporting unit and host, time, GPU) is beside it, not in the hash.

Version 2 adds `observed`: what the comparisons read beyond the facts, the startup's downgrade
ledger (its log templates, each with its kind, ranks and one redacted example) and its decode
samples, with their own `observed_sha256`. They stay out of `sha256` on purpose: the decode
samples of a pinned startup that is still running grow with every decode line, and a fleet
whose hosts imported a version-1 file must keep showing one hash for one startup. A version-1
file still imports; a startup compared with it says its downgrade lines were not compared.
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
from ..logtemplates import BODY_CHARS, DOWNGRADE, MASK_VERSION, OTHER
from ..model import IMPORTED_PREFIX, StartupRecord
from ..redact import redact_value, scrub_text
from ..yamlfile import DuplicateKeyError, FileTooLarge, load_json, read_text
from .codec import plain, record_from_doc

FORMAT: Final = "sglang-sentinel-baseline"
VERSION: Final = 2
READS: Final = (1, 2)  # the versions read_document takes
# The largest baseline file read. A file at every bound below (192 templates of 8,000
# characters with 256 ranks, 32 rules and 32 facts each; 32 decode buckets of 64 samples) as
# `--export` indents it is 7.4 MB; a real one is far smaller (the demo's: 33 kB; 192 templates
# of 2,000 characters on 16 ranks with full decode buckets: about 0.75 MB).
FILE_BYTES: Final = 8 << 20
# Bounds of the observed part as read (what startups/ledger.py and startups/decode_samples.py
# keep, tests/state/test_baseline_file.py holds them equal): templates (TEMPLATES_KEPT +
# OTHER_KEPT), a template's characters (the first BODY_CHARS of a line, masked: a placeholder
# can be longer than what it replaced, `/a` -> `<PATH>`), an example's (EXAMPLE_CHARS), ranks
# per template (RANKS_KEPT) and a rank label's characters (`DP1 PP0 TP7 EP63`), rules and
# facts per template (a line matches a rule or two) and the characters of a rule id, fact,
# decode bucket or counter name (the pack's longest is 43; a user rule's id has no bound).
LEDGER_TEMPLATES: Final = 192
TEMPLATE_CHARS: Final = 4 * BODY_CHARS
EXAMPLE_CHARS: Final = 400
TEMPLATE_RANKS: Final = 256
RANK_CHARS: Final = 64
NAMES: Final = 32
NAME_CHARS: Final = 128
# Decode: buckets (MAX_BUCKETS), samples per bucket (MAX_SAMPLES_PER_BUCKET), numbers per
# sample, capture sizes, counters and phase marks.
DECODE_BUCKETS: Final = 32
BUCKET_SAMPLES: Final = 64
SAMPLE_NUMBERS: Final = 5
CAPTURED: Final = 4096
DECODE_KEYS: Final = 64


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


def observed(record: StartupRecord) -> dict[str, Any]:
    """The startup's ledger and decode samples as a file carries them (None: it has none)."""
    return {"ledger": _ledger_out(record.ledger), "decode": _decode_out(record.decode)}


def _ledger_out(ledger: Mapping[str, Any] | None) -> dict[str, Any] | None:
    # Only the keys log_diff reads, the text redacted again (a record stored by an older
    # version must not leak either).
    if ledger is None:
        return None
    templates: dict[str, dict[str, Any]] = {}
    for t in ledger.get("templates", ()):
        template = scrub_text(str(t.get("template", "")))[:TEMPLATE_CHARS]
        if template and template not in templates:
            templates[template] = {
                "template": template,
                "example": scrub_text(str(t.get("example", "")))[:EXAMPLE_CHARS],
                "ranks": [str(r) for r in t.get("ranks", ())],
                "rules": [str(r) for r in t.get("rules", ())],
                "facts": [str(f) for f in t.get("facts", ())],
                "kind": t.get("kind", DOWNGRADE),
            }
    out: dict[str, Any] = {
        "mask_version": ledger.get("mask_version"),
        "templates": list(templates.values()),
        "dropped": ledger.get("dropped", 0),
    }
    other = ledger.get("other")
    if isinstance(other, Mapping):
        out["other"] = {k: other.get(k, 0) for k in ("lines", "chars", "dropped")}
    return out


def _decode_out(decode: Mapping[str, Any]) -> dict[str, Any] | None:
    if not decode:
        return None
    return {
        "captured": plain(decode.get("captured", [])),
        "buckets": plain(decode.get("buckets", {})),
        "counts": plain(decode.get("counts", {})),
        "phases": plain(decode.get("phases", {})),
    }


def export_document(record: StartupRecord, *, unit: str, gpu: str) -> dict[str, Any]:
    body = content(record)
    seen = observed(record)
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
        "observed": seen,
        "observed_sha256": content_sha256(seen),
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
        doc = load_json(read_text(path, FILE_BYTES))
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
    version = doc.get("version")
    if isinstance(version, bool) or version not in READS:
        raise BaselineFileError(
            f"{path}: baseline file version {version!r} is not supported "
            f"(this sentinel reads versions {', '.join(map(str, READS))})"
        )
    body = doc.get("baseline")
    problems = _shape_problems(body)
    seen: Any = {"ledger": None, "decode": None}
    if version >= 2:
        seen = doc.get("observed")
        problems += observed_problems(seen)
    if problems:
        raise BaselineFileError(f"{path}: malformed baseline: {'; '.join(problems)}")
    assert isinstance(body, dict) and isinstance(seen, dict)
    sha = content_sha256(body)
    if doc.get("sha256") != sha or (
        version >= 2 and doc.get("observed_sha256") != content_sha256(seen)
    ):
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
            "ledger": seen["ledger"],
            "decode": seen["decode"] or {},
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


def observed_problems(seen: Any) -> list[str]:
    """What is wrong with a file's `observed` part (empty: nothing), each problem once."""
    if not isinstance(seen, dict):
        return ['"observed" must be an object']
    problems = []
    if set(seen) != {"ledger", "decode"}:
        problems.append('"observed" must have exactly the keys "ledger" and "decode"')
    ledger, decode = seen.get("ledger"), seen.get("decode")
    if ledger is not None:
        problems += _ledger_problems(ledger)
    if decode is not None:
        problems += _decode_problems(decode)
    return problems


def _ledger_problems(ledger: Any) -> list[str]:
    where = "observed.ledger"
    if not isinstance(ledger, dict):
        return [f'"{where}" must be an object or null']
    problems = []
    mask: Any = ledger.get("mask_version")
    if not _count(mask) or not 1 <= mask <= MASK_VERSION:
        problems.append(
            f'"{where}.mask_version" {mask!r} is unknown (this sentinel knows mask versions '
            f"1 to {MASK_VERSION}; a newer sentinel exported it: upgrade this one)"
        )
    if not _count(ledger.get("dropped")):
        problems.append(f'"{where}.dropped" must be a count (an integer of at least 0)')
    other = ledger.get("other")
    if other is not None and not (
        isinstance(other, dict)
        and set(other) == {"lines", "chars", "dropped"}
        and all(_count(v) for v in other.values())
    ):
        problems.append(f'"{where}.other" must be an object of the counts lines, chars, dropped')
    templates = ledger.get("templates")
    if not isinstance(templates, list):
        return [*problems, f'"{where}.templates" must be a list']
    if len(templates) > LEDGER_TEMPLATES:
        return [
            *problems,
            f'"{where}.templates" has {len(templates)} templates, more than the '
            f"{LEDGER_TEMPLATES} a ledger keeps",
        ]
    seen: set[str] = set()
    for i, item in enumerate(templates):
        problem = _template_problem(item, seen)
        if problem:
            # The first bad template says what is wrong; a file damaged once is damaged often.
            return [*problems, f'"{where}.templates[{i}]" {problem}']
    return problems


def _template_problem(item: Any, seen: set[str]) -> str | None:
    if not isinstance(item, dict):
        return "must be an object"
    if set(item) != {"template", "example", "ranks", "rules", "facts", "kind"}:
        return "must have exactly the keys template, example, ranks, rules, facts, kind"
    for key, least, limit in (("template", 1, TEMPLATE_CHARS), ("example", 0, EXAMPLE_CHARS)):
        text = item[key]
        if not isinstance(text, str) or not least <= len(text) <= limit:
            return f'"{key}" must be a string of {least} to {limit} characters'
    if item["template"] in seen:
        return f"repeats the template {item['template'][:80]!r}"
    seen.add(item["template"])
    if item["kind"] not in (DOWNGRADE, OTHER):
        return f'"kind" must be "{DOWNGRADE}" or "{OTHER}", not {item["kind"]!r}'
    for key, count, chars in (
        ("ranks", TEMPLATE_RANKS, RANK_CHARS),
        ("rules", NAMES, NAME_CHARS),
        ("facts", NAMES, NAME_CHARS),
    ):
        names = item[key]
        if not (
            isinstance(names, list)
            and len(names) <= count
            and all(isinstance(n, str) and 0 < len(n) <= chars for n in names)
        ):
            return f'"{key}" must be a list of at most {count} names of 1 to {chars} characters'
    return None


def _decode_problems(decode: Any) -> list[str]:
    where = "observed.decode"
    if not isinstance(decode, dict) or set(decode) != {"captured", "buckets", "counts", "phases"}:
        return [f'"{where}" must be null or an object of captured, buckets, counts, phases']
    problems = []
    captured = decode["captured"]
    if not (
        isinstance(captured, list)
        and len(captured) <= CAPTURED
        and all(_count(c) for c in captured)
    ):
        problems.append(f'"{where}.captured" must be a list of at most {CAPTURED} batch sizes')
    buckets = decode["buckets"]
    if not isinstance(buckets, dict) or len(buckets) > DECODE_BUCKETS:
        problems.append(f'"{where}.buckets" must be an object of at most {DECODE_BUCKETS} buckets')
    elif not all(
        len(key) <= NAME_CHARS
        and isinstance(samples, list)
        and len(samples) <= BUCKET_SAMPLES
        and all(
            isinstance(x, list) and len(x) == SAMPLE_NUMBERS and all(_number(v) for v in x)
            for x in samples
        )
        for key, samples in buckets.items()
    ):
        problems.append(
            f'"{where}.buckets" must hold at most {BUCKET_SAMPLES} samples a bucket, each a list '
            f"of {SAMPLE_NUMBERS} numbers"
        )
    for key, valid in (("counts", _count), ("phases", _number)):
        value = decode[key]
        if not (
            isinstance(value, dict)
            and len(value) <= DECODE_KEYS
            and all(len(k) <= NAME_CHARS and valid(v) for k, v in value.items())
        ):
            problems.append(f'"{where}.{key}" must be an object of at most {DECODE_KEYS} numbers')
    return problems


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


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
