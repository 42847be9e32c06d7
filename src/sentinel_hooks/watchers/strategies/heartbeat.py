"""Heartbeat watchers (SPEC.md §23): jobs that check in by pinging ``/hooks/ping/{pingKey}``.

No strategy observes anything here: pings arrive through the API (``api.routes.ping``) and the
runner hands each to ``on_ping`` under its lock; ``BeatWatch`` computes when the next success
ping is due (``due_at``: the period or the next cron time after the last success ping, plus
``graceMs``; or ``maxRunMs`` after a ``/start``) and waits for that instant or the next ping,
so an idle heartbeat costs one timer. Overdue fires ``no_progress`` once per episode, a ``fail``
ping ``terminal``; the open fire (``WatcherState.beat_fire``, durable, so a restart across a due
time fires once) ends with the next success ping, which resolves it (SPEC §6.4).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal
from zoneinfo import ZoneInfo

from sentinel_hooks.clock import iso
from sentinel_hooks.config.watcher import HeartbeatWatcher
from sentinel_hooks.watchers.pipeline import FiringPipeline, Outcome
from sentinel_hooks.watchers.retries import Stopping
from sentinel_hooks.watchers.state import WatcherState

if TYPE_CHECKING:
    from sentinel_hooks.watchers.runner import WatcherRunner

PingKind = Literal["success", "start", "fail"]
MAX_EXIT_CODE = 255


@dataclass(frozen=True)
class Ping:
    """One ping: its kind, the exit code it carried (``/{exitCode}``) and its body as text."""

    kind: PingKind
    exit_code: int | None = None
    body: str = ""


def parse_ping(suffix: str | None, body: str) -> Ping | None:
    """The ping a URL's suffix names (None or ``""``: success; ``start``; ``fail``; an exit code
    0 to 255, 0 a success, else a fail); None for any other suffix."""
    if not suffix:
        return Ping("success", body=body)
    if suffix == "start":
        return Ping("start", body=body)
    if suffix == "fail":
        return Ping("fail", body=body)
    if suffix.isascii() and suffix.isdigit() and int(suffix) <= MAX_EXIT_CODE:
        code = int(suffix)
        return Ping("success" if code == 0 else "fail", exit_code=code, body=body)
    return None


def next_scheduled(spec: HeartbeatWatcher, after: datetime) -> datetime:
    """The first time of ``schedule`` (in ``timezone``) after ``after``."""
    from croniter import croniter

    assert spec.schedule is not None
    local = after.astimezone(ZoneInfo(spec.timezone))
    cron = croniter(spec.schedule, local, second_at_beginning=len(spec.schedule.split()) == 6)
    found: datetime = cron.get_next(datetime)
    return found


def due_at(spec: HeartbeatWatcher, state: WatcherState, started: datetime) -> tuple[datetime, bool]:
    """When a success ping is overdue, and whether that is a run's ``maxRunMs`` after its
    ``/start`` (else the period's or the schedule's due time, plus ``graceMs``)."""
    anchor = state.beat_at or started
    grace = timedelta(milliseconds=spec.grace_ms)
    if spec.period_ms is not None:
        due = anchor + timedelta(milliseconds=spec.period_ms) + grace
    else:
        due = next_scheduled(spec, anchor) + grace
    if spec.max_run_ms is not None and state.run_started_at is not None:
        overrun = state.run_started_at + timedelta(milliseconds=spec.max_run_ms)
        if overrun < due:
            return overrun, True
    return due, False


def payload(status: str, state: WatcherState, *, exit_code: int | None = None, body: str = "") -> Any:
    """A heartbeat fire's payload (SPEC §23)."""
    last = state.last_ping_at
    return {"status": status, "exitCode": exit_code, "body": body, "lastPingAt": iso(last) if last else None}


def _opened(outcome: Outcome) -> Outcome:
    """The outcome of a heartbeat fire with its episode open: the callback to resolve, or ``""``
    when none went out (deduped, muted, cooling down), so it is not fired again either."""
    contract = outcome.contract
    callback = contract.callback_id if contract is not None and outcome.fired else ""
    return replace(outcome, state=outcome.state.evolve(beat_fire=callback))


async def on_ping(
    pipeline: FiringPipeline, spec: HeartbeatWatcher, state: WatcherState, ping: Ping, now: datetime
) -> Outcome:
    """What a ping does to the watcher (the runner holds its lock)."""
    state = state.succeeded(now).evolve(last_ping_at=now)
    if ping.kind == "start":
        return Outcome(state.evolve(run_started_at=now))
    if ping.kind == "fail":
        data = payload("fail", state, exit_code=ping.exit_code, body=ping.body)
        fired = await pipeline.fire_beat(spec, "terminal", data, state.evolve(run_started_at=None))
        return _opened(fired)
    open_fire, since = state.beat_fire, state.last_fire_at
    state = state.evolve(beat_at=now, run_started_at=None, beat_fire=None)
    if open_fire is not None:
        seconds = (now - since).total_seconds() if since is not None else 0.0
        await pipeline.resolve_beat(spec, open_fire, seconds)
    return Outcome(state)


async def on_overdue(
    pipeline: FiringPipeline, spec: HeartbeatWatcher, state: WatcherState, started: datetime, body: str
) -> Outcome:
    """The due time passed without a success ping: fire ``no_progress`` (the episode opens)."""
    _, overran = due_at(spec, state, started)
    status = "running too long" if overran else "overdue"
    return _opened(await pipeline.fire_beat(spec, "no_progress", payload(status, state, body=body), state))


RECHECK_S = 30.0  # cluster mode: how often an open fire looks for a ping another replica took


def recheck_s(spec: HeartbeatWatcher) -> float:
    """How often an open fire looks for a ping another replica took: ``RECHECK_S``, or half a
    short period (a ping is expected that often)."""
    if spec.period_ms is None:
        return RECHECK_S
    return min(RECHECK_S, max(1.0, spec.period_ms / 2000))


def with_stored_pings(state: WatcherState, stored: WatcherState) -> WatcherState:
    """``state`` with the pings another replica recorded (``stored`` is newer when its last ping
    is): the period's anchor, a run's start, the open fire and the fire count."""
    theirs, ours = stored.last_ping_at, state.last_ping_at
    if theirs is None or (ours is not None and theirs <= ours):
        return state
    return state.evolve(
        last_ping_at=theirs,
        beat_at=stored.beat_at,
        run_started_at=stored.run_started_at,
        beat_fire=stored.beat_fire,
        fires=max(state.fires, stored.fires),
        last_fire_at=stored.last_fire_at or state.last_fire_at,
    )


class BeatWatch:
    """The due-time watch of one heartbeat runner (made at its first start, kept across restarts)."""

    __slots__ = ("_pinged", "_runner", "last_body")

    def __init__(self, runner: WatcherRunner) -> None:
        self._runner = runner
        self._pinged = asyncio.Event()
        self.last_body = ""  # the last ping's body, for an overdue fire's payload (not stored)

    def pinged(self) -> None:
        """A ping changed the state: compute the due time again."""
        self._pinged.set()

    async def run(self) -> None:
        """Wait for each due time (or a ping) until the runner stops; fire when one passes."""
        runner, pinged = self._runner, self._pinged
        spec = runner.spec
        assert isinstance(spec, HeartbeatWatcher)
        if runner.state.beat_at is None:  # the first period counts from the first start, kept
            now = runner.deps.clock.now()
            await runner.adopt(lambda state: state.evolve(beat_at=state.beat_at or now))
        while not runner.stopping:
            pinged.clear()
            state = runner.state
            if state.beat_fire is not None:  # fired: only a ping changes anything now
                if runner.needs_lease:  # one another replica took, too: looked for now and then
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(pinged.wait(), timeout=recheck_s(spec))
                    await runner.beat_refresh()
                else:
                    await pinged.wait()
                continue
            due, _ = due_at(spec, state, runner.deps.clock.now())
            remaining = (due - runner.deps.clock.now()).total_seconds()
            if remaining > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(pinged.wait(), timeout=remaining)
                continue
            if not await runner.beat_overdue(self.last_body):
                with contextlib.suppress(Stopping):
                    await runner.sleep(1.0)


def next_due(spec: HeartbeatWatcher, state: WatcherState) -> datetime | None:
    """The status's ``nextDueAt``: when the next success ping is due (None before the first start)."""
    if state.beat_at is None:
        return None
    return due_at(spec, state, state.beat_at)[0]


def beat_status(spec: HeartbeatWatcher, state: WatcherState) -> dict[str, str | None]:
    """A heartbeat's part of its status: ``lastPingAt`` and ``nextDueAt``."""
    due = next_due(spec, state)
    last = state.last_ping_at
    return {"lastPingAt": iso(last) if last else None, "nextDueAt": iso(due) if due else None}


def explain(spec: HeartbeatWatcher, *, now: datetime, base_url: str) -> dict[str, Any]:
    """What ``sentinel test`` says of a heartbeat: its ping URLs (the key masked) and, counting
    from a success ping ``now``, when the next one is due and when it is overdue."""
    from sentinel_hooks.relay.fallback import format_duration

    url = f"{base_url.rstrip('/')}/hooks/ping/***"
    if spec.period_ms is not None:
        due = now + timedelta(milliseconds=spec.period_ms)
        every = f"every {format_duration(spec.period_ms / 1000)}"
    else:
        due = next_scheduled(spec, now)
        every = f"on {spec.schedule!r} ({spec.timezone})"
    overdue = due + timedelta(milliseconds=spec.grace_ms)
    lines = [
        f"a success ping is due {every}, {format_duration(spec.grace_ms / 1000)} late at most",
        f"after a ping now, the next is due at {iso(due)} and overdue (no_progress fires) at {iso(overdue)}",
        f"ping URL: {url}  (also {url}/start, {url}/fail, {url}/<exitCode>)",
        f"crontab: ... && curl -fsS -m 10 --retry 5 {url}",
    ]
    if spec.max_run_ms is not None:
        lines.append(f"after a /start ping, a run is overdue {format_duration(spec.max_run_ms / 1000)} later")
    return {"pingUrl": url, "nextDueAt": iso(due), "overdueAt": iso(overdue), "lines": lines}
