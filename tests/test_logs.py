"""Logging setup: JSON lines off a TTY, console on one, secrets scrubbed, re-configurable."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
import structlog

from sglang_sentinel.errors import ConfigError
from sglang_sentinel.logs import configure_logging

SECRET = "sk-EXAMPLE-not-a-real-key"


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def reset_structlog() -> Iterator[None]:
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


def json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


def test_json_lines_when_not_a_tty() -> None:
    out = io.StringIO()
    configure_logging("auto", "info", out)
    log = structlog.get_logger().bind(unit="sglang-qwen.service", invocation="abc123")
    log.info("startup_recorded", outcome="ready", max_running_requests=48)
    log.warning("baseline_pinned")

    first, second = json_lines(out.getvalue())
    assert set(first) == {
        "event", "level", "timestamp", "unit", "invocation", "outcome", "max_running_requests",
    }  # fmt: skip
    assert first["event"] == "startup_recorded"
    assert first["level"] == "info"
    assert first["unit"] == "sglang-qwen.service"
    assert first["invocation"] == "abc123"
    assert first["outcome"] == "ready"
    assert first["max_running_requests"] == 48
    assert (second["event"], second["level"]) == ("baseline_pinned", "warning")
    # Python 3.10's fromisoformat does not read "Z"; the suffix is asserted below.
    stamp = datetime.fromisoformat(str(first["timestamp"]).replace("Z", "+00:00"))
    assert stamp.utcoffset() == timedelta(0)
    assert str(first["timestamp"]).endswith("Z")


def test_contextvars_are_merged() -> None:
    out = io.StringIO()
    configure_logging("json", "info", out)
    structlog.contextvars.bind_contextvars(unit="u.service")
    structlog.get_logger().info("journal_opened")
    assert json_lines(out.getvalue())[0]["unit"] == "u.service"


def test_level_filters_lower_levels() -> None:
    out = io.StringIO()
    configure_logging("json", "warning", out)
    log = structlog.get_logger()
    log.debug("dropped")
    log.info("dropped")
    log.warning("kept")
    log.error("kept_too")
    assert [line["event"] for line in json_lines(out.getvalue())] == ["kept", "kept_too"]


def test_console_when_forced_on_a_non_tty_has_no_colours() -> None:
    out = io.StringIO()
    configure_logging("console", "info", out)
    structlog.get_logger().info("startup_recorded", unit="sglang-qwen.service")
    text = out.getvalue()
    assert "startup_recorded" in text
    assert "unit=sglang-qwen.service" in text
    assert "[info     ]" in text
    assert "\x1b[" not in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text.splitlines()[0])


def test_auto_on_a_tty_is_coloured_console() -> None:
    out = FakeTTY()
    configure_logging("auto", "info", out)
    structlog.get_logger().info("startup_recorded")
    text = out.getvalue()
    assert "startup_recorded" in text
    assert "\x1b[" in text


def test_json_forced_on_a_tty() -> None:
    out = FakeTTY()
    configure_logging("json", "info", out)
    structlog.get_logger().info("startup_recorded")
    assert json_lines(out.getvalue())[0]["event"] == "startup_recorded"


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_secrets_are_scrubbed(fmt: str) -> None:
    out = io.StringIO()
    configure_logging(fmt, "info", out)
    log = structlog.get_logger()
    log.info(
        "startup_seen",
        cmdline=f"python -m sglang.launch_server --model-path Qwen --api-key {SECRET}",
        server_args=f"ServerArgs(model_path='Qwen', api_key='{SECRET}', tp_size=4)",
        nested={"args": [f"--api-key={SECRET}"], "json": f'{{"api_key": "{SECRET}"}}'},
        api_key="plain-value-without-prefix",
    )
    log.info(f"event text with {SECRET}")
    text = out.getvalue()
    assert SECRET not in text
    assert "plain-value-without-prefix" not in text
    assert "<redacted>" in text
    # Only the secrets go; the rest of the line stays readable.
    assert "--model-path Qwen" in text
    assert "tp_size=4" in text


def test_secrets_in_tracebacks_are_scrubbed() -> None:
    out = io.StringIO()
    configure_logging("json", "info", out)
    try:
        raise RuntimeError(f"launch failed: --api-key {SECRET}")
    except RuntimeError:
        structlog.get_logger().exception("launch_failed")
    (line,) = json_lines(out.getvalue())
    assert "RuntimeError: launch failed: --api-key <redacted>" in str(line["exception"])
    assert SECRET not in out.getvalue()


def test_reconfiguring_switches_format_level_and_stream() -> None:
    """SIGHUP reload: loggers from get_logger() follow the new configuration."""
    first, second = io.StringIO(), io.StringIO()
    log = structlog.get_logger()
    configure_logging("json", "info", first)
    log.debug("not_shown")
    log.info("to_first")
    configure_logging("console", "debug", second)
    log.debug("to_second")
    assert [line["event"] for line in json_lines(first.getvalue())] == ["to_first"]
    assert "to_second" in second.getvalue()
    assert "to_second" not in first.getvalue()


def test_default_stream_is_stderr_at_call_time(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("json", "info")
    structlog.get_logger().info("to_stderr")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert json_lines(captured.err)[0]["event"] == "to_stderr"


@pytest.mark.parametrize(
    ("fmt", "level", "problem"),
    [
        ("xml", "info", "log.format: must be one of auto, json, console; got 'xml'"),
        ("json", "loud", "log.level: must be one of debug, info, warning, error; got 'loud'"),
    ],
)
def test_bad_format_or_level_is_a_config_error(fmt: str, level: str, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        configure_logging(fmt, level, io.StringIO())
    assert info.value.problems == [problem]
