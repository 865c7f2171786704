"""Journal entries as Docker's journald log driver writes them, field for field.

Driver fields from moby daemon/logger/journald/journald.go (newJournald, Log): CONTAINER_ID,
CONTAINER_ID_FULL, CONTAINER_NAME, CONTAINER_TAG, IMAGE_NAME, SYSLOG_IDENTIFIER (= the tag,
by default the 12-char id), CONTAINER_LOG_EPOCH (one per logger instance = per start),
CONTAINER_LOG_ORDINAL (1, 2, ... per epoch), SYSLOG_TIMESTAMP, and on the pieces of a line the
copier split at 16 KiB (daemon/logger/copier.go) CONTAINER_PARTIAL_ID / _ORDINAL / _LAST plus
CONTAINER_PARTIAL_MESSAGE=true on all but the last. PRIORITY 3 for stderr, 6 for stdout.
journald adds the trusted fields of the sender, dockerd in docker.service.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone

from journaltools import ExportValue

# moby daemon/logger/copier.go: defaultBufSize = 16 * 1024.
COPIER_BUF = 16 * 1024


def _micros(text: str) -> int:
    when = datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
    return int(when.timestamp()) * 1_000_000


@dataclass
class DockerHost:
    """One host's dockerd writing container lines to the journal through the journald driver."""

    boot_id: str = "6e2c3b1d0f9a4e8b9c7d6e5f4a3b2c1d"
    machine_id: str = "4e2320d8d5d6515bbb2f7e3b59beeeb5"
    hostname: str = "gpu-docker-01"
    dockerd_pid: int = 1187
    # docker.service's invocation: the same for every container until dockerd restarts.
    dockerd_invocation: str = field(default_factory=lambda: secrets.token_hex(16))
    boot_at: str = "2026-01-01 00:00:00"
    entries: list[dict[str, ExportValue]] = field(default_factory=list)
    _now_us: int = 0

    def container(self, name: str, image: str = "lmsysorg/sglang:v0.5.4-cu126") -> Container:
        return Container(self, name, image, secrets.token_hex(32))

    def _append(self, when: str | None, fields: dict[str, ExportValue]) -> None:
        now = _micros(when) if when else self._now_us + 1000
        self._now_us = max(now, self._now_us + 1)
        entry: dict[str, ExportValue] = {
            "__REALTIME_TIMESTAMP": str(self._now_us),
            "__MONOTONIC_TIMESTAMP": str(self._now_us - _micros(self.boot_at)),
            "_BOOT_ID": self.boot_id,
            "_MACHINE_ID": self.machine_id,
            "_HOSTNAME": self.hostname,
            "_PID": str(self.dockerd_pid),
            "_UID": "0",
            "_GID": "0",
            "_COMM": "dockerd",
            "_EXE": "/usr/bin/dockerd",
            "_CMDLINE": "/usr/bin/dockerd -H fd:// --containerd=/run/containerd/containerd.sock",
            "_CAP_EFFECTIVE": "1ffffffffff",
            "_SYSTEMD_CGROUP": "/system.slice/docker.service",
            "_SYSTEMD_UNIT": "docker.service",
            "_SYSTEMD_SLICE": "system.slice",
            "_SYSTEMD_INVOCATION_ID": self.dockerd_invocation,
            "_TRANSPORT": "journal",
        }
        entry.update(fields)
        self.entries.append(entry)


@dataclass
class Container:
    """A container; `start()` begins a new logger instance (new epoch, ordinals from 1)."""

    host: DockerHost
    name: str
    image: str
    id_full: str
    epoch: str | None = None
    ordinal: int = 0
    with_epoch: bool = True  # False: an older engine (no epoch, no partial ids)

    def recreate(self) -> Container:
        """`docker rm` + `docker run --name` again: same name, a new container id."""
        return Container(
            self.host, self.name, self.image, secrets.token_hex(32), with_epoch=self.with_epoch
        )

    def start(self) -> Container:
        self.epoch = secrets.token_hex(32) if self.with_epoch else None
        self.ordinal = 0
        return self

    def _vars(self) -> dict[str, ExportValue]:
        tag = self.id_full[:12]  # the default tag template {{.ID}}
        out: dict[str, ExportValue] = {
            "CONTAINER_ID": self.id_full[:12],
            "CONTAINER_ID_FULL": self.id_full,
            "CONTAINER_NAME": self.name,
            "CONTAINER_TAG": tag,
            "IMAGE_NAME": self.image,
            "SYSLOG_IDENTIFIER": tag,
        }
        if self.epoch is not None:
            out["CONTAINER_LOG_EPOCH"] = self.epoch
        return out

    def _send(self, message: str, when: str | None, stream: str, extra: dict[str, str]) -> None:
        fields = self._vars()
        fields["SYSLOG_TIMESTAMP"] = (when or "2026-01-01 00:00:00").replace(
            " ", "T"
        ) + ".000000000Z"
        fields.update(extra)
        if self.epoch is not None:
            self.ordinal += 1
            fields["CONTAINER_LOG_ORDINAL"] = str(self.ordinal)
        fields["PRIORITY"] = "3" if stream == "stderr" else "6"
        fields["MESSAGE"] = message
        self.host._append(when, fields)

    def line(self, message: str, when: str | None = None, stream: str = "stderr") -> Container:
        """One line; longer than 16 KiB it arrives in pieces, as the log copier splits it."""
        data = message.encode("utf-8")
        if len(data) <= COPIER_BUF:
            self._send(message, when, stream, {})
            return self
        pieces = [data[i : i + COPIER_BUF] for i in range(0, len(data), COPIER_BUF)]
        partial_id = secrets.token_hex(32)
        for n, piece in enumerate(pieces, start=1):
            last = n == len(pieces)
            extra: dict[str, str] = {}
            if self.with_epoch:  # PLogMetaData: engines with partial ids
                extra["CONTAINER_PARTIAL_ID"] = partial_id
                extra["CONTAINER_PARTIAL_ORDINAL"] = str(n)
                extra["CONTAINER_PARTIAL_LAST"] = "true" if last else "false"
            if not last:
                extra["CONTAINER_PARTIAL_MESSAGE"] = "true"
            self._send(piece.decode("utf-8"), when if n == 1 else None, stream, extra)
        return self
