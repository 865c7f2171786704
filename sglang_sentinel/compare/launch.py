"""Launch evidence: what differs between two startups' launch (flags, server_args, memory)."""

from __future__ import annotations

from ..model import Evidence, FactValue, Origin, StartupRecord
from ..serverargs import diff_server_args, setting_flags


def flag_names(record: StartupRecord) -> set[str]:
    """The flags on the record's command line (`--tp-size 4` -> `--tp-size`)."""
    return {f.split(" ", 1)[0] for f in record.launch_flags}


def common_evidence(record: StartupRecord, baseline: StartupRecord) -> list[Evidence]:
    """What differs between the two startups' launch: flags, server_args fields, free memory."""
    out: list[Evidence] = []
    old_flags = {f.split(" ", 1)[0]: f for f in baseline.launch_flags}
    new_flags = {f.split(" ", 1)[0]: f for f in record.launch_flags}
    added = tuple(new_flags[k] for k in new_flags if k not in old_flags)
    removed = tuple(old_flags[k] for k in old_flags if k not in new_flags)
    changed = [k for k in new_flags if k in old_flags and old_flags[k] != new_flags[k]]
    if added:
        out.append(Evidence("flags_added", new=added))
    if removed:
        out.append(Evidence("flags_removed", old=removed))
    if changed:
        out.append(
            Evidence(
                "flags_changed",
                old=tuple(old_flags[k] for k in changed),
                new=tuple(new_flags[k] for k in changed),
            )
        )
    if record.server_args and baseline.server_args:
        out.extend(_server_args_evidence(record, baseline))
    old_mem, new_mem = baseline.fact("load_avail_mem_gb"), record.fact("load_avail_mem_gb")
    if is_number(old_mem) and is_number(new_mem) and old_mem != new_mem:
        out.append(Evidence("memory_at_load", old=old_mem, new=new_mem))
    return out


def _server_args_evidence(record: StartupRecord, baseline: StartupRecord) -> list[Evidence]:
    """Changed server_args fields, each marked with whether the command line asked for it.

    Fields that only appear or disappear with their default value are what a version upgrade
    does to the schema; they are counted, not listed.
    """
    out: list[Evidence] = []
    on_cmdline = flag_names(record)
    schema_added = schema_removed = 0
    for change in diff_server_args(baseline.server_args, record.server_args):
        if change.note == "field removed" or (change.note == "field added" and not change.new):
            if change.note == "field removed":
                schema_removed += 1
            else:
                schema_added += 1
            continue
        origin: Origin
        flags = setting_flags(change.spelling or change.field)
        asked = next((f for f in flags if f in on_cmdline), None)
        if not record.launch_flags:
            origin = "command_line_not_seen"
        elif asked is not None:
            origin = "command_line"
        else:
            origin = "set_by_sglang"
        out.append(
            Evidence(
                "server_arg_changed",
                field=change.field,
                old=change.old,
                new=change.new,
                origin=origin,
                flag=asked if origin == "command_line" else None,
                detail=change.note,
            )
        )
    if schema_added or schema_removed:
        out.append(Evidence("schema_changed", old=schema_removed, new=schema_added))
    return out


def is_number(value: FactValue) -> bool:
    """A numeric fact value (a bool is not a number)."""
    return isinstance(value, int | float) and not isinstance(value, bool)
