"""Host-side probes of the end-to-end: timed steps, Prometheus text, waits with a deadline, ports."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


class JourneyError(AssertionError):
    """A step's expectation did not hold."""


@dataclass
class Step:
    name: str
    seconds: float = 0.0
    ok: bool = False
    detail: str = ""


Sample = tuple[str, frozenset[tuple[str, str]]]
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text: str) -> dict[Sample, float]:
    samples: dict[Sample, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m:
            labels = frozenset(_LABEL.findall(m.group(2) or ""))
            samples[(m.group(1), labels)] = float(m.group(3))
    return samples


def wait_until(check: Callable[[], T | None], timeout: float, what: str, step: float = 0.1) -> T:
    """Poll `check` until it returns something other than None/False, with a deadline."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = check()
        if last is not None and last is not False:
            return last
        if time.monotonic() >= deadline:
            raise JourneyError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(step)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def report(steps: list[Step]) -> str:
    lines = [f"  {'step':<66} {'s':>7}  result"]
    for st in steps:
        lines.append(f"  {st.name:<66} {st.seconds:>7.1f}  {'ok' if st.ok else 'FAILED'}")
    return "\n".join(lines)
