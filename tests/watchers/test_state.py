"""The watcher state's stored form: what survives a restart, and what is written at once."""

from __future__ import annotations

from datetime import UTC, datetime

from sentinel_hooks.watchers.episodes import ProbeEpisodes
from sentinel_hooks.watchers.lifecycle import FiringState
from sentinel_hooks.watchers.state import WatcherState

T0 = datetime(2026, 1, 1, tzinfo=UTC)
STALLED = ProbeEpisodes(stall=FiringState(True, T0, T0), stall_mark="m")


def test_open_probe_episodes_survive_the_stored_form() -> None:
    """A restart finds the probe episodes that were open (so they do not fire again)."""
    state = WatcherState(probe_episodes=STALLED)
    assert STALLED == WatcherState.from_json(state.to_json()).probe_episodes


def test_state_stored_before_probe_episodes_reads_as_none_open() -> None:
    """A state written by an older version has no probeEpisodes key: nothing is open."""
    stored = WatcherState().to_json()
    del stored["probeEpisodes"]
    assert ProbeEpisodes() == WatcherState.from_json(stored).probe_episodes


def test_a_change_of_probe_episodes_is_durable() -> None:
    """Opening or ending an episode is written at once, like the firing state."""
    assert WatcherState().durable_key() != WatcherState(probe_episodes=STALLED).durable_key()
