"""The suite's Hypothesis profile (tests/conftest.py): no property test has a wall-time deadline."""

from __future__ import annotations

from hypothesis import HealthCheck, settings


def test_the_default_settings_have_no_deadline() -> None:
    assert settings().deadline is None


def test_settings_that_name_other_options_keep_no_deadline() -> None:
    # What the suite's @settings(...) decorators build: options they do not name come from the
    # loaded profile, so the deadline stays off without each test saying so.
    assert settings(max_examples=5, suppress_health_check=[HealthCheck.too_slow]).deadline is None
