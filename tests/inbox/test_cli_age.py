"""The age column of `sentinel inbox list`: how long ago an item was created."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from sentinel_hooks.cli.inbox import age

NOW = datetime(2026, 1, 3, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("created_at", "expected"),
    [
        ("2026-01-03T11:59:15.000Z", "45s"),
        ("2026-01-03T11:48:00.000Z", "12m"),
        ("2026-01-03T09:00:00.000Z", "3h"),
        ("2026-01-01T11:00:00.000Z", "2d"),
    ],
)
def test_age_uses_the_largest_whole_unit(created_at: str, expected: str) -> None:
    """Seconds, minutes, hours or days, whichever is the largest whole unit."""
    assert expected == age(created_at, NOW)


def test_age_of_a_future_instant_is_zero() -> None:
    """Clock skew between service and CLI never shows a negative age."""
    assert "0s" == age("2026-01-03T12:00:05.000Z", NOW)
