"""The one error hierarchy of sglang-sentinel; only the CLI maps these to exit codes."""

from __future__ import annotations


class SentinelError(Exception):
    """Base of every error the library raises on purpose."""


class UsageError(SentinelError):
    """The user asked for something that cannot be done (unknown startup, bad argument)."""


class NoDataError(SentinelError):
    """There is nothing to report on yet (no startups recorded, no baseline)."""


class ConfigError(SentinelError):
    """The configuration file is invalid; carries every problem found."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


class RuleError(SentinelError):
    """One or more rule files are invalid; `problems` lists each as `file:rule_id: message`."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class JournalError(SentinelError):
    """The journal could not be opened or read."""


class StateError(SentinelError):
    """The state directory or database cannot be used."""
