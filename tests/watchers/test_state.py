"""The watcher state's stored form: what survives a restart, and what is written at once."""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from sentinel_hooks.clock import from_ms
from sentinel_hooks.watchers.episodes import ProbeEpisodes
from sentinel_hooks.watchers.lifecycle import FiringState
from sentinel_hooks.watchers.state import _STORED, WatcherState

T0 = datetime(2026, 1, 1, tzinfo=UTC)
STALLED = ProbeEpisodes(stall=FiringState(True, T0, T0), stall_mark="m")


def test_open_probe_episodes_survive_the_stored_form() -> None:
    """A restart finds the probe episodes that were open (so they do not fire again)."""
    state = WatcherState(probe_episodes=STALLED)
    assert STALLED == WatcherState.from_json(state.to_json()).probe_episodes


def test_state_stored_before_probe_episodes_reads_as_none_open() -> None:
    """A state written by an older version has no probeEpisodes key: nothing is open."""
    stored = {"enabled": None, "consecutiveFailures": 0, "fires": 3, "firing": {"firing": False}}
    assert ProbeEpisodes() == WatcherState.from_json(stored).probe_episodes


def test_the_stored_form_holds_only_what_differs_from_a_new_watcher() -> None:
    """Every poll writes the state: the defaults are left out, and read back as defaults."""
    assert {} == WatcherState().to_json()
    polled = WatcherState(last_check_at=T0, next_check_at=T0)
    assert {"lastCheckAtMs", "nextCheckAtMs"} == set(polled.to_json())
    assert polled == WatcherState.from_json(polled.to_json())


def test_every_field_has_a_key_in_the_stored_form() -> None:
    """A field added to the state without a stored key would fail every write of a changed one."""
    assert _STORED.keys() == {f.name for f in fields(WatcherState)}


def test_a_state_stored_in_full_reads_as_before() -> None:
    """A state an earlier version wrote with every key (defaults included) reads the same."""
    full: dict[str, Any] = {
        "enabled": None, "disabledReason": None, "consecutiveFailures": 2, "lastError": "HTTP 500",
        "lastCheckAtMs": 1767225600000, "nextCheckAtMs": None, "fires": 1, "lastFireAtMs": None,
        "firing": {"firing": False, "firedAtMs": None, "lastFireAtMs": None}, "probeEpisodes": {},
        "lastEventAtMs": None, "quietFired": False, "reconnects": 0, "lastGapMs": None,
        "silencedEpisode": None, "lastPingAtMs": None, "beatAtMs": None, "runStartedAtMs": None,
        "beatFires": [], "beatMissedAtMs": None, "lastPingKind": None, "lastPingExitCode": None,
        "lastPingBody": "",
    }  # fmt: skip
    state = WatcherState(consecutive_failures=2, last_error="HTTP 500", last_check_at=T0, fires=1)
    assert state == WatcherState.from_json(full)
    assert state.to_json() == {k: v for k, v in full.items() if k in state.to_json()}


def test_a_change_of_probe_episodes_is_durable() -> None:
    """Opening or ending an episode is written at once, like the firing state."""
    assert WatcherState().durable_key() != WatcherState(probe_episodes=STALLED).durable_key()


_instants = st.none() | st.integers(0, 4_102_444_800_000).map(from_ms)  # ms precision, as stored
_texts = st.none() | st.text(max_size=8)
_firing = st.builds(FiringState, st.booleans(), _instants, _instants, _texts)


@given(
    enabled=st.none() | st.booleans(),
    failures=st.integers(0, 50),
    error=_texts,
    checked=_instants,
    next_at=_instants,
    fires=st.integers(0, 10**6),
    firing=_firing,
    stall=_firing,
    quiet=st.booleans(),
    gap=st.none() | st.integers(0, 10**9),
    beat_fires=st.lists(st.tuples(st.text(min_size=1, max_size=6), _instants.filter(bool)), max_size=3),
    exit_code=st.none() | st.integers(-1, 255),
    body=st.text(max_size=12),
)
def test_every_state_reads_back_from_its_stored_form(
    enabled: bool | None,
    failures: int,
    error: str | None,
    checked: datetime | None,
    next_at: datetime | None,
    fires: int,
    firing: FiringState,
    stall: FiringState,
    quiet: bool,
    gap: int | None,
    beat_fires: list[tuple[str, datetime]],
    exit_code: int | None,
    body: str,
) -> None:
    """Whatever is left out of the stored form as a default reads back as that default."""
    state = WatcherState(
        enabled=enabled,
        consecutive_failures=failures,
        last_error=error,
        last_check_at=checked,
        next_check_at=next_at,
        fires=fires,
        firing=firing,
        # only open episodes are kept (``ProbeEpisodes.to_json``), as before the stored form left defaults out
        probe_episodes=ProbeEpisodes(stall=stall, stall_mark="m") if stall.firing else ProbeEpisodes(),
        quiet_fired=quiet,
        last_gap_ms=gap,
        beat_fires=tuple(beat_fires),
        last_ping_exit_code=exit_code,
        last_ping_body=body,
    )
    assert state == WatcherState.from_json(json.loads(json.dumps(state.to_json())))
