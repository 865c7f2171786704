"""structlog setup: JSON lines off a terminal, a readable console on one; always to stderr.

stdout is reserved for command output (reports, `--json`), so logs never go there. When stderr is
connected to the journal (systemd's `JOURNAL_STREAM`), every line starts with its syslog level,
`<4>` for a warning, which journald (SyslogLevelPrefix=yes, the default) strips and stores as the
entry's PRIORITY: `journalctl -p warning -u sglang-sentinel` then shows warnings and errors.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TextIO

from .errors import ConfigError
from .redact import REDACTED, is_secret_key, scrub_text

if TYPE_CHECKING:
    from structlog.typing import EventDict, Processor, WrappedLogger

_FORMATS = ("auto", "json", "console")
# The stdlib logging's numbers, which structlog's filtering logger takes (logging itself is not
# imported for four constants: no command uses it).
_LEVELS: Mapping[str, int] = {"debug": 10, "info": 20, "warning": 30, "error": 40}
# syslog(3) levels by structlog level name (add_log_level's names; "exception" is "error").
PRIORITIES: Mapping[str, int] = {
    "debug": 7,
    "info": 6,
    "warning": 4,
    "error": 3,
    "critical": 2,
}
ERR = 3  # an error message of the CLI itself (`error: invalid rules: ...`)
# Nested values deeper than this are rendered as-is rather than walked; log context is shallow.
_MAX_DEPTH = 8


def _scrub_value(key: str, value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return REDACTED if is_secret_key(key) else scrub_text(value)
    if value is not None and is_secret_key(key):
        return REDACTED  # `api_key=123` bound as a number is still a secret
    if depth >= _MAX_DEPTH:
        return value
    if isinstance(value, Mapping):
        return {k: _scrub_value(str(k), v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_scrub_value(key, v, depth + 1) for v in value)
    return value


def scrub_secrets(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """Processor: redact secrets in every value, including the event and formatted tracebacks.

    The last line of defence; data is meant to be redacted where it enters (redact.py).
    """
    return {key: _scrub_value(key, value) for key, value in event_dict.items()}


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or file-like without isatty
        return False


def journal_stream_connected(stream: TextIO | None = None) -> bool:
    """True when `stream` (default: stderr) is the journal stream systemd connected us to.

    systemd sets JOURNAL_STREAM=DEVICE:INODE of that stream (systemd.exec(5)); a stderr
    redirected elsewhere by the user (a file, a pipe, a terminal) has another device or inode.
    """
    expected = os.environ.get("JOURNAL_STREAM", "")
    dev, _, ino = expected.partition(":")
    if not (dev.isdigit() and ino.isdigit()):
        return False
    out = sys.stderr if stream is None else stream
    try:
        st = os.fstat(out.fileno())
    except (AttributeError, OSError, ValueError):  # closed, or a file-like object without an fd
        return False
    return (st.st_dev, st.st_ino) == (int(dev), int(ino))


def with_priority(text: str, priority: int) -> str:
    """Each line of `text` prefixed with `<priority>`, as journald's SyslogLevelPrefix reads it."""
    return "\n".join(f"<{priority}>{line}" for line in text.split("\n"))


def print_error(text: str, priority: int = ERR) -> None:
    """Print a message of the CLI to stderr; on the journal, at syslog level `priority`."""
    if journal_stream_connected():
        text = with_priority(text, priority)
    print(text, file=sys.stderr)


def _prefixed(renderer: Processor) -> Processor:
    """Wrap a renderer so its text carries the event's syslog level on every line."""

    def render(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> Any:
        priority = PRIORITIES.get(str(event_dict.get("level", "info")), 6)
        return with_priority(str(renderer(logger, method_name, event_dict)), priority)

    return render


class _CurrentStderr:
    """Writes to whatever `sys.stderr` is at write time, not at configure time.

    A CLI call in a test (or any host that swaps sys.stderr) must not leave structlog holding a
    stream that is later closed.
    """

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(fmt: str = "auto", level: str = "info", stream: TextIO | None = None) -> None:
    """(Re)configure structlog; safe to call again, e.g. on SIGHUP. `stream` defaults to stderr.

    structlog is configured now if it is imported already, else when a `Logger` first emits an
    event at or above `level` (a command that logs nothing never imports it).
    """
    problems = []
    if fmt not in _FORMATS:
        problems.append(f"log.format: must be one of {', '.join(_FORMATS)}; got {fmt!r}")
    if level not in _LEVELS:
        problems.append(f"log.level: must be one of {', '.join(_LEVELS)}; got {level!r}")
    if problems:
        raise ConfigError(problems)
    # Resolved at call time, not as a default argument, so a replaced sys.stderr is honoured.
    out = sys.stderr if stream is None else stream
    tty = _is_tty(out)
    json_lines = fmt == "json" or (fmt == "auto" and not tty)
    on_journal = journal_stream_connected(out)

    def apply() -> None:
        _configure_structlog(
            json_lines=json_lines, tty=tty, on_journal=on_journal, level=_LEVELS[level], out=stream
        )

    with _configuring:
        _pending.clear()
        if "structlog" in sys.modules:  # configuring costs nothing more: do it now
            apply()
        else:
            _pending.append((_LEVELS[level], apply))


def _configure_structlog(
    *, json_lines: bool, tty: bool, on_journal: bool, level: int, out: TextIO | None
) -> None:
    import structlog

    renderer: Processor
    if json_lines:
        renderer = structlog.processors.JSONRenderer()
    else:
        # Tracebacks are formatted to text by format_exc_info below so the scrubber sees them;
        # the renderer then prints that text as it is.
        renderer = structlog.dev.ConsoleRenderer(
            colors=tty, exception_formatter=structlog.dev.plain_traceback
        )
    if on_journal:
        renderer = _prefixed(renderer)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            scrub_secrets,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.WriteLoggerFactory(
            file=_CurrentStderr() if out is None else out  # type: ignore[arg-type]
        ),
        # Loggers bound before a reload must pick up the new configuration.
        cache_logger_on_first_use=False,
    )


# The configuration configure_logging was given while structlog was not imported yet: its level
# and how to apply it (at most one; structlog's own configuration is just as process-global).
_pending: list[tuple[int, Callable[[], None]]] = []
_configuring = threading.Lock()  # a first event on two threads at once applies it once
# The level of each logger method, as structlog's filtering logger ranks them.
_METHOD_LEVELS: Mapping[str, int] = {**_LEVELS, "exception": _LEVELS["error"]}


class Logger:
    """structlog's logger `name`, imported at the first event that passes the configured level.

    Importing structlog costs a command ~45 ms of CPU (its stdlib module imports asyncio), a
    third of a `sentinel check`; a `scan` or `check` that logs nothing it shows never pays it.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def debug(self, event: str, **kw: Any) -> None:
        self._emit("debug", event, kw)

    def info(self, event: str, **kw: Any) -> None:
        self._emit("info", event, kw)

    def warning(self, event: str, **kw: Any) -> None:
        self._emit("warning", event, kw)

    def error(self, event: str, **kw: Any) -> None:
        self._emit("error", event, kw)

    def exception(self, event: str, **kw: Any) -> None:
        """An error event with the traceback of the exception being handled."""
        self._emit("exception", event, kw)

    def _emit(self, method: str, event: str, kw: dict[str, Any]) -> None:
        if _pending:
            with _configuring:
                if _pending:
                    level, apply = _pending[0]
                    if _METHOD_LEVELS[method] < level:
                        return  # what structlog's filtering logger would do, without importing it
                    _pending.clear()
                    apply()
        import structlog

        getattr(structlog.get_logger(self.name), method)(event, **kw)
