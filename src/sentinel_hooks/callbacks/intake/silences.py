"""Silences and maintenance windows (SPEC.md §14): which fires are muted now, and by what.

``Silences`` answers ``silenced_by(envelope)`` for the intake on every fire (a watcher's, a
manual one, an ingested event, an envelope POSTed to /hooks/sentinel) and makes and expires
silences for the API. Matching is pure (``core.silences``); this module adds the clock, the store
and a short-lived cache:

* The silences that are active or pending are read from the store at most every
  ``refresh_ms`` (default 500 ms), and only when a fire asks: no observation reads the store,
  and a quiet service reads nothing. A silence made or expired through this replica's API is put
  into the cache at once, so it applies to the next fire here; other replicas (Redis) see it at
  their next read, within ``refresh_ms`` — under a second.
* Maintenance windows come from sentinel.yaml. Each is active from an occurrence of its cron
  schedule for ``durationMs``; its span is computed with croniter and kept until it ends (or,
  while inactive, until its next occurrence), so a fire costs no cron arithmetic.

When several silences match one fire, the one that ends last names it (then the lower id);
silences win over windows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from croniter import croniter
from ulid import ULID

from sentinel_hooks.clock import Clock
from sentinel_hooks.config.maintenance import MaintenanceWindow
from sentinel_hooks.config.watcher import AnyWatcher
from sentinel_hooks.core.checks import MatchMode
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.core.paths import MISSING
from sentinel_hooks.core.silences import Matcher, fire_facts, matches
from sentinel_hooks.errors import NotFound, StoreError
from sentinel_hooks.store.base import SilenceStore
from sentinel_hooks.store.records import Page, utc_ms
from sentinel_hooks.store.silences import Silence, SilenceState

REFRESH_MS = 500
LOAD_PAGE = 500
LOAD_PAGES = 20  # at most 10,000 active and 10,000 pending silences are applied


@dataclass(frozen=True)
class WindowSpan:
    """One occurrence of a maintenance window: active from ``starts_at`` until ``ends_at``."""

    window: MaintenanceWindow
    starts_at: datetime
    ends_at: datetime


def window_span(window: MaintenanceWindow, now: datetime) -> WindowSpan | None:
    """The occurrence of ``window`` active at ``now`` (its latest start at or before ``now``, if
    ``now`` is within ``durationMs`` of it), else None."""
    local = now.astimezone(ZoneInfo(window.timezone)) + timedelta(microseconds=1)
    seconds_first = len(window.schedule.split()) == 6
    started: datetime = croniter(window.schedule, local, second_at_beginning=seconds_first).get_prev(datetime)
    starts_at = utc_ms(started)
    ends_at = starts_at + timedelta(milliseconds=window.duration_ms)
    return WindowSpan(window, starts_at, ends_at) if starts_at <= now < ends_at else None


def next_window_start(window: MaintenanceWindow, now: datetime) -> datetime:
    """The first occurrence of ``window`` after ``now``."""
    local = now.astimezone(ZoneInfo(window.timezone))
    seconds_first = len(window.schedule.split()) == 6
    return utc_ms(croniter(window.schedule, local, second_at_beginning=seconds_first).get_next(datetime))


def watcher_facts(watcher: AnyWatcher, payload: Any = MISSING) -> dict[str, Any]:
    """The facts a fire of ``watcher`` carrying ``payload`` would have (``core.silences.fire_facts``)."""
    return {
        "watcherId": watcher.id,
        "eventName": watcher.event_name,
        "priority": watcher.fire.priority,
        "tags": list(watcher.tags),
        "skillId": watcher.skill_id,
        "strategy": watcher.strategy_name,
        "environment": watcher.environment,
        "payload": payload,
    }


@dataclass(frozen=True)
class Muting:
    """What mutes fires at one instant: the active silences (the one ending last first) and the
    active maintenance windows."""

    silences: Sequence[Silence]
    windows: Sequence[WindowSpan]

    def match(self, facts: dict[str, Any]) -> str | None:
        """The id of the first silence, else the name of the first window, matching ``facts``."""
        for silence in self.silences:
            if matches(silence.matchers, silence.match, facts):
                return silence.id
        for span in self.windows:
            if matches(span.window.matchers, span.window.match, facts):
                return span.window.name
        return None


class _Window:
    """A maintenance window and the span it is known to keep until ``valid_until``."""

    def __init__(self, window: MaintenanceWindow) -> None:
        self.window = window
        self.span: WindowSpan | None = None
        self.valid_until: datetime | None = None

    def active(self, now: datetime) -> WindowSpan | None:
        if self.valid_until is None or now >= self.valid_until or (self.span and now < self.span.starts_at):
            self.span = window_span(self.window, now)
            self.valid_until = self.span.ends_at if self.span else next_window_start(self.window, now)
        return self.span


class Silences:
    """The silences of a deployment (shared through the store) and this service's windows."""

    def __init__(
        self,
        store: SilenceStore,
        clock: Clock,
        windows: Sequence[MaintenanceWindow] = (),
        *,
        refresh_ms: int = REFRESH_MS,
    ) -> None:
        self._store = store
        self._clock = clock
        self._windows = [_Window(w) for w in windows]
        self._refresh = timedelta(milliseconds=refresh_ms)
        self._live: dict[str, Silence] = {}
        self._loaded_at: datetime | None = None
        self._loading: asyncio.Lock | None = None

    # -- matching ------------------------------------------------------------------------------

    async def silenced_by(self, envelope: Envelope) -> str | None:
        """The id of the silence, or the name of the window, that mutes the fire of ``envelope``
        now; None when none does (the fire's facts are made only when something could match:
        a storm's every alert asks)."""
        muting = await self.snapshot()
        return muting.match(fire_facts(envelope)) if muting.silences or muting.windows else None

    async def match(self, facts: dict[str, Any]) -> str | None:
        """Like ``silenced_by`` for a fire's facts (``fire_facts``, ``watcher_facts``)."""
        return (await self.snapshot()).match(facts)

    async def snapshot(self, *, stale_ok: bool = False) -> Muting:
        """The silences and windows active now, to match many fires against (watcher listings).

        With ``stale_ok`` a store that cannot be read leaves the silences last read (a watcher's
        status must still answer while the store is down: it says why the watcher fails).
        """
        now = self._clock.now()
        spans = [span for w in self._windows if (span := w.active(now)) is not None]
        try:
            active = await self._active(now)
        except StoreError:
            if not stale_ok:
                raise
            active = self._cached_active(now)
        return Muting(active, spans)

    async def _active(self, now: datetime) -> list[Silence]:
        if self._loaded_at is None or now - self._loaded_at >= self._refresh or now < self._loaded_at:
            await self._reload(now)
        return self._cached_active(now)

    def _cached_active(self, now: datetime) -> list[Silence]:
        active = [s for s in self._live.values() if s.state_at(now) == "active"]
        active.sort(key=lambda s: (-s.ends_at.timestamp(), s.id))
        return active

    async def _reload(self, now: datetime) -> None:
        """Read the active and pending silences (one reader at a time; the others use its answer)."""
        if self._loading is None:
            self._loading = asyncio.Lock()
        async with self._loading:
            if self._loaded_at is not None and self._loaded_at <= now < self._loaded_at + self._refresh:
                return  # another fire reloaded while this one waited
            live: dict[str, Silence] = {}
            for state in ("active", "pending"):
                cursor: str | None = None
                for _ in range(LOAD_PAGES):
                    page = await self._store.list_silences(
                        now=now, state=state, limit=LOAD_PAGE, cursor=cursor
                    )
                    live.update((s.id, s) for s in page.items)
                    cursor = page.next_cursor
                    if cursor is None:
                        break
            self._live, self._loaded_at = live, now

    def _remember(self, silence: Silence) -> None:
        """A silence this replica just wrote applies here at once, whatever the cache's age."""
        if silence.state_at(self._clock.now()) == "expired":
            self._live.pop(silence.id, None)
        else:
            self._live[silence.id] = silence

    # -- what the API asks ---------------------------------------------------------------------

    async def create(
        self,
        matchers: Sequence[Matcher],
        *,
        match: MatchMode,
        starts_at: datetime | None,
        ends_at: datetime,
        comment: str,
        created_by: str,
    ) -> Silence:
        """A new silence, stored and applied here at once. ``ValueError`` when it would end before
        it starts or is already over (the API checks both first, with its own message)."""
        now = utc_ms(self._clock.now())
        starts = utc_ms(starts_at) if starts_at is not None else now
        ends = utc_ms(ends_at)
        if ends <= starts:
            raise ValueError("endsAt must be after startsAt")
        if ends <= now:
            raise ValueError("endsAt is in the past: the silence would never apply")
        silence = Silence(
            id=str(ULID()),
            matchers=list(matchers),
            match=match,
            starts_at=starts,
            ends_at=ends,
            created_by=created_by,
            created_at=now,
            comment=comment,
        )
        await self._store.put_silence(silence)
        self._remember(silence)
        return silence

    async def get(self, silence_id: str) -> Silence:
        """The silence; ``NotFound`` for an unknown id."""
        silence = await self._store.get_silence(silence_id)
        if silence is None:
            raise NotFound(f"silence {silence_id!r} not found")
        return silence

    async def expire(self, silence_id: str) -> Silence:
        """End the silence now (one already over is returned as it is)."""
        silence = await self.get(silence_id)
        expired = silence.expired_at(self._clock.now())
        if expired is not silence:
            await self._store.put_silence(expired)
        self._remember(expired)
        return expired

    async def page(self, state: SilenceState | None, *, limit: int, cursor: str | None) -> Page[Silence]:
        """One page of silences, newest first, in ``state`` now (None: any)."""
        return await self._store.list_silences(now=self._clock.now(), state=state, limit=limit, cursor=cursor)

    def now(self) -> datetime:
        return self._clock.now()
