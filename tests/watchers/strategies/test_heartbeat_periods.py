"""A heartbeat's due times (SPEC.md §23), as values: one fire per missed period, never two for
the same period however often the clock is read, the latest one after a long outage, and the
stored state (open fires, the last ping) as it was."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sentinel_hooks.config.watcher import HeartbeatWatcher
from sentinel_hooks.watchers.state import WatcherState
from sentinel_hooks.watchers.strategies.heartbeat import (
    Due,
    beat_callback_id,
    beat_status,
    missed,
    next_due,
)

T0 = datetime(2026, 11, 28, 3, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def beat(**keys: Any) -> HeartbeatWatcher:
    base = {"id": "backup", "strategy": "heartbeat", "pingKey": "k" * 20, "deliveryTargets": ["t"]}
    return HeartbeatWatcher.model_validate(base | keys)


HOURLY = beat(periodMs=3_600_000, graceMs=60_000)
NIGHTLY = beat(schedule="0 3 * * *", timezone="UTC", graceMs=3_600_000)


def test_the_first_period_is_due_a_period_and_the_grace_after_the_anchor() -> None:
    """A success ping at T0 makes the next due T0 + period + grace; nothing is missed before it."""
    state = WatcherState(beat_at=T0)
    due = T0 + timedelta(hours=1) + MINUTE
    assert Due(due) == next_due(HOURLY, state, T0)
    assert missed(HOURLY, state, due - timedelta(seconds=1)) is None
    assert Due(due) == missed(HOURLY, state, due)


def test_a_handled_period_is_not_missed_again_and_the_next_one_is_due() -> None:
    """Once a period's due time is handled, reading the clock again finds nothing until the next."""
    first = T0 + timedelta(hours=1) + MINUTE
    state = WatcherState(beat_at=T0, beat_missed_at=first)
    assert missed(HOURLY, state, first + timedelta(minutes=30)) is None
    assert Due(first + timedelta(hours=1)) == next_due(HOURLY, state, first)
    assert Due(first + timedelta(hours=1)) == missed(HOURLY, state, first + timedelta(hours=1))


def test_periods_passed_during_an_outage_are_one_the_latest() -> None:
    """Five periods passed while the service was down: at its start, one due time, the latest."""
    state = WatcherState(beat_at=T0, beat_missed_at=T0 + timedelta(hours=1) + MINUTE)
    now = T0 + timedelta(hours=6, minutes=30)
    assert Due(T0 + timedelta(hours=6) + MINUTE) == missed(HOURLY, state, now, latest=True)


def test_while_running_late_periods_are_missed_in_turn() -> None:
    """A watch that woke late (a busy loop) takes the passed due times one by one, none skipped."""
    state = WatcherState(beat_at=T0)
    now = T0 + timedelta(hours=3, minutes=30)
    first = missed(HOURLY, state, now)
    assert Due(T0 + timedelta(hours=1) + MINUTE) == first
    assert first is not None
    second = missed(HOURLY, state.evolve(beat_missed_at=first.at), now)
    assert Due(T0 + timedelta(hours=2) + MINUTE) == second


def test_a_schedule_is_due_at_each_cron_time_plus_the_grace() -> None:
    """A nightly schedule: due at 04:00 after the 03:00 run; two nights missed are one, the latest."""
    state = WatcherState(beat_at=T0 + timedelta(minutes=5))
    tomorrow = T0 + timedelta(days=1, hours=1)
    assert Due(tomorrow) == next_due(NIGHTLY, state, T0)
    two_nights = tomorrow + timedelta(days=1, hours=2)
    assert Due(tomorrow + timedelta(days=1)) == missed(NIGHTLY, state, two_nights, latest=True)
    handled = state.evolve(beat_missed_at=tomorrow)
    assert Due(tomorrow + timedelta(days=1)) == next_due(NIGHTLY, handled, tomorrow)


def test_a_run_overrunning_max_run_is_due_once() -> None:
    """After a /start, maxRunMs later is due (sooner than the period), and only once."""
    spec = beat(periodMs=3_600_000, maxRunMs=600_000)
    state = WatcherState(beat_at=T0, run_started_at=T0 + MINUTE)
    overrun = T0 + 11 * MINUTE
    assert Due(overrun, overran=True) == missed(spec, state, overrun)
    assert missed(spec, state.evolve(beat_missed_at=overrun), overrun + MINUTE) is None
    assert missed(spec, state.evolve(beat_missed_at=overrun), overrun + MINUTE, latest=True) is None


def test_each_period_has_its_own_callback_id() -> None:
    """The id depends on the watcher and the due time only: the same after a restart."""
    first, second = T0, T0 + timedelta(hours=1)
    assert beat_callback_id("backup", first) == beat_callback_id("backup", first)
    assert beat_callback_id("backup", first) != beat_callback_id("backup", second)
    assert beat_callback_id("backup", first) != beat_callback_id("other", first)


def test_the_open_fires_and_the_last_ping_survive_a_store_round_trip() -> None:
    """Open fires, the handled due time and the last ping's kind, exit code and body are stored."""
    state = WatcherState(
        beat_at=T0,
        beat_fires=(("beat.a", T0), ("beat.b", T0 + MINUTE)),
        beat_missed_at=T0 + MINUTE,
        last_ping_at=T0,
        last_ping_kind="fail",
        last_ping_exit_code=3,
        last_ping_body="disk full",
    )
    assert state == WatcherState.from_json(state.to_json())


def test_a_state_stored_with_one_open_fire_still_has_it() -> None:
    """A state stored before fires were kept per period (``beatFire``) keeps its open fire."""
    stored = WatcherState.from_json({"beatFire": "01J0", "lastFireAtMs": 1_000})
    assert (("01J0", datetime.fromtimestamp(1, tz=UTC)),) == stored.beat_fires


def test_the_status_says_when_a_due_time_passed() -> None:
    """``overdue`` is true once a due time passed with no success ping, false after one."""
    state = WatcherState(beat_at=T0, last_ping_at=T0, last_ping_kind="success")
    due = T0 + timedelta(hours=1) + MINUTE
    assert not beat_status(HOURLY, state, due - MINUTE)["overdue"]
    assert beat_status(HOURLY, state, due)["overdue"]
    assert beat_status(HOURLY, state.evolve(beat_missed_at=due), due + MINUTE)["overdue"]
    shown = beat_status(HOURLY, state.evolve(beat_at=due + MINUTE, beat_missed_at=due), due + MINUTE)
    assert (False, "success") == (shown["overdue"], shown["lastPingKind"])
