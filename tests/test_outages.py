"""A failing loop's log stays short: the first failure, a summary now and then, the recovery."""

from __future__ import annotations

import logging
import random

import pytest

from sentinel_hooks.clock import FakeClock
from sentinel_hooks.errors import StoreUnavailable
from sentinel_hooks.outages import STORE_RETRY, SUMMARY_EVERY_S, Outage

log = logging.getLogger("tests.outages")
DOWN = StoreUnavailable("redis store redis://127.0.0.1:1/0: ping failed: connection refused")


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.levelno > logging.DEBUG]


def test_an_outage_of_any_length_is_a_first_line_a_summary_per_interval_and_a_recovery(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Four attempts a second for 65 s: three lines, not 260, and the recovery says how long."""
    caplog.set_level(logging.DEBUG)
    clock = FakeClock()
    outage = Outage(log, "claiming due deliveries", clock=clock)
    for _ in range(260):
        outage.failed(DOWN)
        clock.advance(0.25)
    outage.succeeded()
    outage.succeeded()
    assert [
        ("WARNING", f"claiming due deliveries failed: {DOWN}"),
        ("WARNING", f"claiming due deliveries still failing after 30 s (121 attempts): {DOWN}"),
        ("WARNING", f"claiming due deliveries still failing after 60 s (241 attempts): {DOWN}"),
        ("INFO", "claiming due deliveries works again after 65.0 s (260 failed attempt(s))"),
    ] == lines(caplog)
    assert 30.0 == SUMMARY_EVERY_S


def test_an_unexpected_failure_is_an_error_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    """Not one of Sentinel's errors (a bug): ERROR, with the exception attached."""
    outage = Outage(log, "retention pass", clock=FakeClock())
    outage.failed(KeyError("contract"))
    (record,) = caplog.records
    assert ("ERROR", "retention pass failed: 'contract'", True) == (
        record.levelname,
        record.getMessage(),
        record.exc_info is not None,
    )


def test_the_wait_before_each_attempt_grows_to_the_cap_and_starts_again_after_a_recovery() -> None:
    """The delays follow STORE_RETRY's ceilings (equal jitter: between half and all of each)."""
    outage = Outage(log, "settling due contracts", clock=FakeClock(), rng=random.Random(1))
    waits = [outage.failed(DOWN) for _ in range(6)]
    outage.succeeded()
    ceilings = [STORE_RETRY.ceiling_s(n) for n in range(1, 7)]
    assert [0.5, 1.0, 2.0, 4.0, 5.0, 5.0] == ceilings
    assert all(c / 2 <= w <= c for w, c in zip(waits, ceilings, strict=True)), waits
    assert outage.failed(DOWN) <= 0.5
