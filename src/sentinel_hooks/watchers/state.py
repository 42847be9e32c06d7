"""A watcher's runtime state: status, firing lifecycle, enable/disable, counters.

Kept as JSON in the store (``Store.write_watcher_batch``), written by the one runner that
owns the watcher, so it survives restarts: enabled/disabled, fireOnce, the firing state, the
open probe episodes and the fire count are as they were after a crash.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Literal

from sentinel_hooks.clock import from_ms, iso, to_ms
from sentinel_hooks.watchers.episodes import ProbeEpisodes
from sentinel_hooks.watchers.lifecycle import FiringState

StatusState = Literal["ok", "failing", "disabled", "stopped"]


def _ms(at: datetime | None) -> int | None:
    return to_ms(at) if at is not None else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _at(value: Any) -> datetime | None:
    return from_ms(value) if isinstance(value, int) else None


def _beat_fires(stored: Any, legacy: Any, legacy_at: Any) -> tuple[tuple[str, datetime], ...]:
    """A heartbeat's open fires as stored (``[[callbackId, atMs], …]``), or the one open fire of
    a state stored before fires were kept per period (``beatFire``)."""
    if isinstance(stored, list):
        return tuple(
            (item[0], from_ms(item[1]))
            for item in stored
            if isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], str)
            and isinstance(item[1], int)
        )
    if isinstance(legacy, str) and legacy:
        return ((legacy, _at(legacy_at) or from_ms(0)),)
    return ()


@dataclass(frozen=True)
class WatcherState:
    """Everything the service remembers about one watcher between polls and restarts."""

    enabled: bool | None = None  # None: as the file says; True/False: set through the API or fireOnce
    disabled_reason: str | None = None
    consecutive_failures: int = 0
    last_error: str | None = None
    last_check_at: datetime | None = None
    next_check_at: datetime | None = None
    fires: int = 0
    last_fire_at: datetime | None = None
    firing: FiringState = field(default_factory=FiringState)
    probe_episodes: ProbeEpisodes = field(default_factory=ProbeEpisodes)  # command watchers
    last_event_at: datetime | None = None
    quiet_fired: bool = False
    reconnects: int = 0
    last_gap_ms: int | None = None
    silenced_episode: str | None = None  # the silence or window that muted this episode's fire
    # heartbeat watchers (``watchers.strategies.heartbeat``): the last ping of any kind (its kind,
    # exit code and body, 10 KB at most), the period's anchor (the last success ping, else the
    # watch's first start), a run's /start, the due time of the last missed period that was
    # handled (fired, or stood for by a fail ping), and the open fires (callback id, fired at)
    # that the next success ping resolves
    last_ping_at: datetime | None = None
    beat_at: datetime | None = None
    run_started_at: datetime | None = None
    beat_fires: tuple[tuple[str, datetime], ...] = ()
    beat_missed_at: datetime | None = None
    last_ping_kind: str | None = None
    last_ping_exit_code: int | None = None
    last_ping_body: str = ""

    def to_json(self) -> dict[str, Any]:
        """The stored form: the fields that differ from a new watcher's (``from_json`` gives the
        others their defaults).

        Every poll of a watcher polled less often than ``STATE_FLUSH_S`` writes its state, and
        nearly all of it is at its defaults: the full form (~500 bytes) cost the SQLite thread
        about twice the CPU of these ~60 (one random page of the states table either way, but a
        row that fills it; issue 34.1's CPU per poll).
        """
        data: dict[str, Any] = {}
        for name, value in self.__dict__.items():
            if value is not _DEFAULTS[name] and value != _DEFAULTS[name]:
                key, encode = _STORED[name]
                data[key] = encode(value)
        return data

    def durable_key(self) -> tuple[Any, ...]:
        """What must reach the store at once when it changes: every field but the check and
        event instants, the running failure count and the last error (only whether it fails)."""
        return (
            self.enabled,
            self.disabled_reason,
            self.fires,
            self.last_fire_at,
            self.firing,
            self.probe_episodes,
            self.quiet_fired,
            self.reconnects,
            self.last_gap_ms,
            self.silenced_episode,
            self.consecutive_failures > 0,
            self.last_ping_at,
            self.beat_at,
            self.run_started_at,
            self.beat_fires,
            self.beat_missed_at,
            self.last_ping_kind,
            self.last_ping_exit_code,
            self.last_ping_body,
        )

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> WatcherState:
        """The state stored as ``to_json``; what is missing or of the wrong type takes its default.

        Built without ``__init__`` (as ``evolve`` copies): a start-up decodes every stored state,
        10,000 of them before the first poll of a replica that takes over a cluster's leases, and
        a frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``.
        """
        if not data:
            return _INITIAL
        get = data.get
        enabled, last_gap = get("enabled"), get("lastGapMs")
        state = object.__new__(cls)
        state.__dict__.update(
            enabled=enabled if isinstance(enabled, bool) else None,
            disabled_reason=get("disabledReason"),
            consecutive_failures=int(get("consecutiveFailures") or 0),
            last_error=get("lastError"),
            last_check_at=_at(get("lastCheckAtMs")),
            next_check_at=_at(get("nextCheckAtMs")),
            fires=int(get("fires") or 0),
            last_fire_at=_at(get("lastFireAtMs")),
            firing=FiringState.from_json(get("firing")),
            probe_episodes=ProbeEpisodes.from_json(get("probeEpisodes")),
            last_event_at=_at(get("lastEventAtMs")),
            quiet_fired=bool(get("quietFired")),
            reconnects=int(get("reconnects") or 0),
            last_gap_ms=last_gap if isinstance(last_gap, int) else None,
            silenced_episode=_text(get("silencedEpisode")),
            last_ping_at=_at(get("lastPingAtMs")),
            beat_at=_at(get("beatAtMs")),
            run_started_at=_at(get("runStartedAtMs")),
            beat_fires=_beat_fires(get("beatFires"), get("beatFire"), get("lastFireAtMs")),
            beat_missed_at=_at(get("beatMissedAtMs")),
            last_ping_kind=_text(get("lastPingKind")),
            last_ping_exit_code=exit_code if isinstance(exit_code := get("lastPingExitCode"), int) else None,
            last_ping_body=_text(get("lastPingBody")) or "",
        )
        return state

    def is_enabled(self, declared: bool) -> bool:
        """The effective enabled flag: an API/fireOnce override wins over the file."""
        return declared if self.enabled is None else self.enabled

    def evolve(self, **changes: Any) -> WatcherState:
        """A copy with ``changes``: ``dataclasses.replace`` without re-running ``__init__``.

        Every poll of every watcher makes a few of these copies; ``replace`` costs several
        times more (it rebuilds the keyword arguments of every field and calls ``__init__``).
        """
        if not _FIELD_NAMES.issuperset(changes):
            raise TypeError(f"WatcherState has no field(s) {sorted(changes.keys() - _FIELD_NAMES)}")
        copy = object.__new__(WatcherState)
        copy.__dict__.update(self.__dict__, **changes)
        return copy

    def succeeded(self, at: datetime) -> WatcherState:
        return self.evolve(consecutive_failures=0, last_error=None, last_check_at=at)

    def failed(self, at: datetime, error: str) -> WatcherState:
        return self.evolve(
            consecutive_failures=self.consecutive_failures + 1, last_error=error, last_check_at=at
        )


_FIELD_NAMES = frozenset(f.name for f in fields(WatcherState))
_INITIAL = WatcherState()  # immutable: every watcher without a stored state shares it
_DEFAULTS: dict[str, Any] = dict(_INITIAL.__dict__)


def _same(value: Any) -> Any:
    return value


def _instants(fires: tuple[tuple[str, datetime], ...]) -> list[list[Any]]:
    return [[callback_id, to_ms(at)] for callback_id, at in fires]


_STORED: dict[str, tuple[str, Any]] = {  # field -> (key in the stored form, its encoding)
    "enabled": ("enabled", _same),
    "disabled_reason": ("disabledReason", _same),
    "consecutive_failures": ("consecutiveFailures", _same),
    "last_error": ("lastError", _same),
    "last_check_at": ("lastCheckAtMs", _ms),
    "next_check_at": ("nextCheckAtMs", _ms),
    "fires": ("fires", _same),
    "last_fire_at": ("lastFireAtMs", _ms),
    "firing": ("firing", FiringState.to_json),
    "probe_episodes": ("probeEpisodes", ProbeEpisodes.to_json),
    "last_event_at": ("lastEventAtMs", _ms),
    "quiet_fired": ("quietFired", _same),
    "reconnects": ("reconnects", _same),
    "last_gap_ms": ("lastGapMs", _same),
    "silenced_episode": ("silencedEpisode", _same),
    "last_ping_at": ("lastPingAtMs", _ms),
    "beat_at": ("beatAtMs", _ms),
    "run_started_at": ("runStartedAtMs", _ms),
    "beat_fires": ("beatFires", _instants),
    "beat_missed_at": ("beatMissedAtMs", _ms),
    "last_ping_kind": ("lastPingKind", _same),
    "last_ping_exit_code": ("lastPingExitCode", _same),
    "last_ping_body": ("lastPingBody", _same),
}


def status_state(state: WatcherState, *, declared_enabled: bool, running: bool) -> StatusState:
    """The status ``state`` of SPEC §9 (what /metrics counts per scrape, for every watcher)."""
    if not state.is_enabled(declared_enabled):
        return "disabled"
    if not running:
        return "stopped"
    return "failing" if state.consecutive_failures > 0 else "ok"


def is_firing(state: WatcherState, *, lasting: bool) -> bool:
    """The status's ``firing`` (SPEC §9): whether the watcher is in a fired episode now, one that
    has fired and not yet re-armed (SPEC §3, §4):

    * its conditions' edge, when they describe a lasting state (``lasting``: a polled watcher, or
      one with ``fire.trigger: edge``); an event of a level-triggered subscription or webhook
      fires once and leaves nothing firing, whatever the next event brings;
    * an open probe episode of a ``command`` watcher (terminal, stall, probe error), which fires
      once and lasts until the probe reports the job moving again;
    * an ``expectEventWithinMs`` quiet period that fired, until an event arrives;
    * a heartbeat's open fires (missed periods, a fail ping), until a success ping.
    """
    episodes = state.probe_episodes
    open_episode = episodes.terminal.firing or episodes.stall.firing or episodes.probe_error.firing
    beat_open = bool(state.beat_fires)
    return (lasting and state.firing.firing) or open_episode or state.quiet_fired or beat_open


def status_json(
    state: WatcherState, *, declared_enabled: bool, running: bool, lasting: bool
) -> dict[str, Any]:
    """The API's watcher status (SPEC §9); ``lasting`` as for ``is_firing``."""
    enabled = state.is_enabled(declared_enabled)
    return {
        "state": status_state(state, declared_enabled=declared_enabled, running=running),
        "firing": is_firing(state, lasting=lasting),
        "lastError": state.last_error,
        "consecutiveFailures": state.consecutive_failures,
        "lastCheckAt": iso(state.last_check_at) if state.last_check_at else None,
        "nextCheckAt": iso(state.next_check_at) if state.next_check_at and enabled else None,
        "fires": state.fires,
    }
