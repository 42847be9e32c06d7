"""Instants as milliseconds since the epoch, the form every store keeps them in."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from sentinel_hooks.clock import from_ms, to_ms


@given(st.integers(0, 4_102_444_800_000))
def test_an_instant_in_milliseconds_reads_back_as_itself(ms: int) -> None:
    """No float on the way: a stored instant does not lose a millisecond per round trip."""
    assert ms == to_ms(from_ms(ms))


def test_an_instant_a_float_would_round_down_is_kept() -> None:
    """137438953.471 s times 1000 is 137438953470.99998 as a float."""
    assert 137_438_953_471 == to_ms(from_ms(137_438_953_471))


def test_microseconds_are_cut_to_the_millisecond_below() -> None:
    assert 1_767_225_600_001 == to_ms(datetime(2026, 1, 1, 0, 0, 0, 1_999, tzinfo=UTC))
