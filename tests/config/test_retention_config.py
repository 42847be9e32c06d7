"""sentinel.yaml ``retention``: whole numbers of days or records, 0 disabling a limit, nothing converted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.errors import ConfigError
from sentinel_hooks.retention import UNBOUNDED_HISTORY, Ages, history_keep
from tests.conftest import Writer


def test_retention_loads_with_zero_disabling_a_limit(project: Writer) -> None:
    """Given values are kept; 0 means no cutoff (and an unbounded observation history)."""
    config = (
        "retention: {callbacksDays: 7, inboxClosedDays: 0, observationsPerWatcher: 0, transcriptsDays: 2}\n"
    )
    retention = load_config(project(config), environ={}).service.retention
    now = datetime(2026, 3, 1, tzinfo=UTC)
    before = Ages.from_spec(retention).cutoffs(now)
    assert (now - timedelta(days=7), None, now - timedelta(days=2)) == (
        before.callbacks,
        before.inbox,
        before.sessions,
    )
    assert UNBOUNDED_HISTORY == history_keep(retention)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ('"30"', "expected a whole number, got the text '30'"),
        ("true", "expected a whole number, got the boolean true"),
        ("1.5", "expected a whole number, got the number 1.5"),
        ("-1", "greater than or equal to 0"),
    ],
)
def test_retention_values_are_strict_whole_numbers(project: Writer, value: str, fragment: str) -> None:
    """A string, a boolean, a fraction or a negative number is an error at its line, never converted."""
    config = f"retention:\n  callbacksDays: {value}\n"
    with pytest.raises(ConfigError) as caught:
        load_config(project(config), environ={})
    [issue] = caught.value.issues
    assert (2, "retention.callbacksDays", True) == (issue.line, issue.key, fragment in issue.message)


def test_unknown_retention_key_is_an_error(project: Writer) -> None:
    """A misspelt key is refused with a hint."""
    with pytest.raises(ConfigError, match="callbacksDays"):
        load_config(project("retention: {callbackDays: 3}\n"), environ={})
