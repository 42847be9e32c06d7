"""Heartbeat watchers (SPEC.md §23): jobs that check in by pinging ``/hooks/ping/{pingKey}``.

No strategy observes anything here: pings arrive through the API (``api.routes.ping``) and the
runner's heartbeat part (``watchers.beats``) hands each to ``on_ping`` under the runner's lock,
and waits for the next due time (``next_due``): the next period (``periodMs`` after the last
success ping, or the next ``schedule`` time after it) plus ``graceMs``, or ``maxRunMs`` after a
``/start``. An idle heartbeat costs one timer.

One fire per missed period: each period that passes with no success ping fires ``no_progress``
once (``on_overdue``), under a callback id and a payload (``dueAt``) of its own, so its fire and
dedupe key are that period's; ``beat_missed_at`` (stored) says which periods were handled, so a
poll of the clock, a restart or a kill -9 never fires one twice, and the id makes a fire the
store took before a crash a repeat, not a second page. While the watch runs, each due time fires
in turn; those that passed while the service was down (found at its start) fire once, for the
latest. A ``fail`` ping fires ``terminal`` and stands for the period it came in (that period
fires nothing more). The next success ping resolves every open fire (``beat_fires``: each gets
its resolved line; one not yet paged settles ``resolved``, SPEC §6.4).
The last ping's kind, exit code and body are stored with the state: they survive restarts and
are the payload of the next fire (``{status, exitCode, body, lastPingAt, dueAt}``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

from sentinel_hooks.canonical import sha256_hex
from sentinel_hooks.clock import iso
from sentinel_hooks.config.watcher import HeartbeatWatcher
from sentinel_hooks.errors import CallbackExists
from sentinel_hooks.watchers.pipeline import FiringPipeline, Outcome
from sentinel_hooks.watchers.state import WatcherState

PingKind = Literal["success", "start", "fail"]
MAX_EXIT_CODE = 255
CALLBACK_PREFIX = "beat."  # a missed period's callback id: this + a hash of the watcher and due time
MAX_OPEN_FIRES = 50  # open fires kept for the next success ping to resolve (the oldest drop out)


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
    found: datetime = _cron(spec, after).get_next(datetime)
    return found


def _last_scheduled(spec: HeartbeatWatcher, before: datetime) -> datetime:
    """The last time of ``schedule`` (in ``timezone``) before ``before``."""
    found: datetime = _cron(spec, before).get_prev(datetime)
    return found


def _cron(spec: HeartbeatWatcher, at: datetime) -> Any:
    from croniter import croniter

    assert spec.schedule is not None
    local = at.astimezone(ZoneInfo(spec.timezone))
    return croniter(spec.schedule, local, second_at_beginning=len(spec.schedule.split()) == 6)


@dataclass(frozen=True)
class Due:
    """A due time (grace included) and whether it is a run's ``maxRunMs`` after its ``/start``."""

    at: datetime
    overran: bool = False


def _period_due(spec: HeartbeatWatcher, state: WatcherState, started: datetime) -> datetime:
    """The due time of the first period after the anchor not yet handled (``beat_missed_at``)."""
    anchor = state.beat_at or started
    grace = timedelta(milliseconds=spec.grace_ms)
    handled = state.beat_missed_at
    if spec.period_ms is not None:
        period = timedelta(milliseconds=spec.period_ms)
        first = anchor + period + grace
        if handled is None or handled < first:
            return first
        return first + period * ((handled - first) // period + 1)
    after = anchor if handled is None or handled - grace < anchor else handled - grace
    return next_scheduled(spec, after) + grace


def _overrun(spec: HeartbeatWatcher, state: WatcherState) -> datetime | None:
    """When the running job (a ``/start`` with no success since) overruns ``maxRunMs``, unless
    that was handled already."""
    if spec.max_run_ms is None or state.run_started_at is None:
        return None
    overrun = state.run_started_at + timedelta(milliseconds=spec.max_run_ms)
    handled = state.beat_missed_at
    return overrun if handled is None or overrun > handled else None


def next_due(spec: HeartbeatWatcher, state: WatcherState, started: datetime) -> Due:
    """The next due time not yet handled: the next period's, or a run's overrun when sooner."""
    due = _period_due(spec, state, started)
    overrun = _overrun(spec, state)
    return Due(overrun, overran=True) if overrun is not None and overrun < due else Due(due)


def missed(spec: HeartbeatWatcher, state: WatcherState, now: datetime, *, latest: bool = False) -> Due | None:
    """The first due time passed by ``now`` and not yet handled (None: nothing is overdue); with
    ``latest``, the last of them, which stands for all (the service was down across them)."""
    if not latest:
        first = next_due(spec, state, now)
        return first if first.at <= now else None
    due = _period_due(spec, state, now)
    passed: list[Due] = []
    if due <= now:
        grace = timedelta(milliseconds=spec.grace_ms)
        if spec.period_ms is not None:
            period = timedelta(milliseconds=spec.period_ms)
            last = due + period * ((now - due) // period)
        else:
            last = max(due, _last_scheduled(spec, now - grace) + grace)
        passed.append(Due(last))
    overrun = _overrun(spec, state)
    if overrun is not None and overrun <= now:
        passed.append(Due(overrun, overran=True))
    return max(passed, key=lambda d: d.at) if passed else None


def beat_callback_id(watcher_id: str, due: datetime) -> str:
    """The callback id of the fire for the period due at ``due``: the same after a restart."""
    return CALLBACK_PREFIX + sha256_hex(f"{watcher_id}\n{iso(due)}")[:32]


def payload(status: str, state: WatcherState, *, due: datetime | None = None) -> Any:
    """A heartbeat fire's payload (SPEC §23): the last ping's exit code and body, when it came,
    and (a missed period's) its due time."""
    last = state.last_ping_at
    data = {
        "status": status,
        "exitCode": state.last_ping_exit_code,
        "body": state.last_ping_body,
        "lastPingAt": iso(last) if last else None,
    }
    if due is not None:
        data["dueAt"] = iso(due)
    return data


def _opened(outcome: Outcome, now: datetime) -> Outcome:
    """The outcome of a heartbeat fire with the fire among the open ones (when one went out)."""
    contract = outcome.contract
    if contract is None or not outcome.fired:
        return outcome
    fires = (*outcome.state.beat_fires, (contract.callback_id, now))[-MAX_OPEN_FIRES:]
    return replace(outcome, state=outcome.state.evolve(beat_fires=fires))


async def on_ping(
    pipeline: FiringPipeline, spec: HeartbeatWatcher, state: WatcherState, ping: Ping, now: datetime
) -> Outcome:
    """What a ping does to the watcher (the runner holds its lock)."""
    state = state.succeeded(now).evolve(
        last_ping_at=now,
        last_ping_kind=ping.kind,
        last_ping_exit_code=ping.exit_code,
        last_ping_body=ping.body,
    )
    if ping.kind == "start":
        return Outcome(state.evolve(run_started_at=now))
    if ping.kind == "fail":
        # the period it came in (the first not yet handled): the fail stands for it
        state = state.evolve(run_started_at=None, beat_missed_at=_period_due(spec, state, now))
        return _opened(await pipeline.fire_beat(spec, "terminal", payload("fail", state), state), now)
    open_fires = state.beat_fires
    state = state.evolve(beat_at=now, run_started_at=None, beat_fires=())
    for callback_id, fired_at in open_fires:
        await pipeline.resolve_beat(spec, callback_id, (now - fired_at).total_seconds())
    return Outcome(state)


async def on_overdue(
    pipeline: FiringPipeline, spec: HeartbeatWatcher, state: WatcherState, due: Due, now: datetime
) -> Outcome:
    """The due time ``due`` passed without a success ping: fire ``no_progress`` for it, once."""
    status = "running too long" if due.overran else "overdue"
    data = payload(status, state, due=due.at)
    handled = state.evolve(beat_missed_at=due.at)
    callback_id = beat_callback_id(spec.id, due.at)
    try:
        fired = await pipeline.fire_beat(spec, "no_progress", data, handled, callback_id=callback_id)
    except CallbackExists as exc:  # made before a crash kept the state from being stored: not again
        if exc.callback_id != callback_id or exc.state in {"silenced", "deduped"}:
            return Outcome(handled)  # it was muted or deduped then: nothing to resolve
        fires = (*handled.beat_fires, (callback_id, now))[-MAX_OPEN_FIRES:]
        return Outcome(handled.evolve(beat_fires=fires, fires=handled.fires + 1, last_fire_at=now))
    return _opened(fired, now)


RECHECK_S = 30.0  # cluster mode: how often an open fire looks for a ping another replica took


def recheck_s(spec: HeartbeatWatcher) -> float:
    """How often an open fire looks for a ping another replica took: ``RECHECK_S``, or half a
    short period (a ping is expected that often)."""
    if spec.period_ms is None:
        return RECHECK_S
    return min(RECHECK_S, max(1.0, spec.period_ms / 2000))


def with_stored_pings(state: WatcherState, stored: WatcherState) -> WatcherState:
    """``state`` with the pings another replica recorded (``stored`` is newer when its last ping
    is): the last ping, the period's anchor, a run's start, the open fires and the fire count."""
    theirs, ours = stored.last_ping_at, state.last_ping_at
    if theirs is None or (ours is not None and theirs <= ours):
        return state
    return state.evolve(
        last_ping_at=theirs,
        last_ping_kind=stored.last_ping_kind,
        last_ping_exit_code=stored.last_ping_exit_code,
        last_ping_body=stored.last_ping_body,
        beat_at=stored.beat_at,
        run_started_at=stored.run_started_at,
        beat_fires=stored.beat_fires,
        beat_missed_at=max(filter(None, (state.beat_missed_at, stored.beat_missed_at)), default=None),
        fires=max(state.fires, stored.fires),
        last_fire_at=stored.last_fire_at or state.last_fire_at,
    )


def due_now(spec: HeartbeatWatcher, state: WatcherState) -> Due | None:
    """The status's ``nextDueAt``: when the next success ping is due (None before the first start)."""
    if state.beat_at is None:
        return None
    return next_due(spec, state, state.beat_at)


def beat_status(spec: HeartbeatWatcher, state: WatcherState, now: datetime) -> dict[str, Any]:
    """A heartbeat's part of its status: the last ping (when, kind, exit code), when the next
    success ping is due, and whether a due time passed with none (``overdue``)."""
    due = due_now(spec, state)
    last, anchor, handled = state.last_ping_at, state.beat_at, state.beat_missed_at
    passed = handled is not None and anchor is not None and anchor < handled <= now
    overdue = passed or (due is not None and due.at <= now)
    return {
        "lastPingAt": iso(last) if last else None,
        "lastPingKind": state.last_ping_kind,
        "lastPingExitCode": state.last_ping_exit_code,
        "nextDueAt": iso(due.at) if due else None,
        "overdue": overdue,
    }


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
