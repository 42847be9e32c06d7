"""Model budgets (SPEC.md §20): every model call of a callback counted, and refused once a budget
is spent.

A ``Meter`` stands for one callback: ``check`` before each model call (the session's turns and
compaction summaries, the judge rules its actions meet) reads the counters of every budget that
applies (the fire's, the watcher's UTC day, the service's UTC day) and raises ``BudgetExhausted``
naming the first one spent; after the call its usage (as the API reported it, else estimated)
is added to those counters and to its model's day, in the store (``UsageStore``), so replicas
and restarts share them: by ``record`` (a judge's call), or for a session's own calls with the
reply's transcript entry, in its store step (``measure``, then ``counted``). The first time a
day budget is found spent, one inbox escalation is opened for it (its id is derived from the
budget's key: once per day per scope).

The fire's counter is read once per session at most: only this callback's session and its
judges spend it, all through this meter, so after a read (or, for a new session, knowing it
has made no call yet) the meter keeps it up to date itself. The day counters, which other fires
and replicas spend, are read before every call.

Judge rules are asked deep inside the action policy (commands, MCP calls, notify messages);
the session sets ``METER`` while it runs, and ``judge.py`` reads it, so the callback's judges are
counted and bounded without handing a meter through every gate.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from sentinel_hooks.callbacks.backends.base import ModelReply
from sentinel_hooks.canonical import sha256_hex
from sentinel_hooks.clock import Clock
from sentinel_hooks.config.budgets import Budgets, Limit, WatcherBudget
from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.core.usage import (
    Usage,
    call_usage,
    counted_keys,
    fire_key,
    model_day_key,
    service_day_key,
    utc_day,
    watcher_day_key,
)
from sentinel_hooks.errors import SentinelError
from sentinel_hooks.events import Events
from sentinel_hooks.store.base import UsageCount, UsageStore

if TYPE_CHECKING:
    from sentinel_hooks.inbox.items import Inbox

ScopeKind = Literal["fire", "watcher_day", "service_day"]
Call = Literal["turn", "summary", "judge"]
COUNTER_TTL_MS = 8 * 86_400_000  # a day's counters outlive the day by a week (status, reports)


class BudgetExhausted(SentinelError):
    """A model call was not made: ``which`` budget is spent (SPEC §20)."""

    def __init__(self, scope: ScopeKind, which: str) -> None:
        super().__init__(f"budget exhausted ({which})")
        self.scope = scope
        self.which = which


@dataclass(frozen=True)
class Budget:
    """One budget that applies to a call: its scope, the store key that counts it, the limit, and
    how it is named to people (the setting to change)."""

    kind: ScopeKind
    key: str
    limit: Limit
    which: str

    def spent(self, used: Usage) -> bool:
        """Whether ``used`` reaches the limit (another call would spend past it)."""
        tokens, usd = self.limit.tokens, self.limit.usd
        return (tokens is not None and used.tokens >= tokens) or (usd is not None and used.cost_usd >= usd)

    def which_of(self, used: Usage) -> str:
        """``budgets.perFire.tokens: 200105 of 200000``: the setting reached and the spend."""
        tokens, usd = self.limit.tokens, self.limit.usd
        if tokens is not None and used.tokens >= tokens:
            return f"{self.which}.tokens: {used.tokens} of {tokens}"
        return f"{self.which}.usd: {used.cost_usd:.4f} of {usd:g}"


def budgets_for(
    *,
    callback_id: str,
    watcher_id: str,
    day: str,
    service: Budgets,
    watcher: WatcherBudget | None,
) -> list[Budget]:
    """Every budget that applies to a call of this fire on ``day`` (limits left null do not)."""
    found = [
        Budget("fire", fire_key(callback_id), service.per_fire, "budgets.perFire"),
        Budget("service_day", service_day_key(day), service.per_day, "budgets.perDay"),
    ]
    if watcher is not None:
        where = f"watcher {watcher_id} fire.budget"
        found += [
            Budget("fire", fire_key(callback_id), watcher.per_fire, f"{where}.perFire"),
            Budget("watcher_day", watcher_day_key(watcher_id, day), watcher.per_day, f"{where}.perDay"),
        ]
    return [b for b in found if b.limit.applies]


def exhausted(budgets: Sequence[Budget], used: Mapping[str, Usage]) -> tuple[Budget, str] | None:
    """The first budget ``used`` has spent, with its words, or None when every one has room."""
    for budget in budgets:
        spent = used.get(budget.key, Usage())
        if budget.spent(spent):
            return budget, budget.which_of(spent)
    return None


METER: contextvars.ContextVar[Meter | None] = contextvars.ContextVar("sentinel_meter", default=None)
"""The meter of the callback whose session runs in this task (judge rules read it)."""


@dataclass(frozen=True)
class Measured:
    """One model call's usage: as its transcript entry records it, and what to add to the counters."""

    recorded: dict[str, Any]
    count: UsageCount


@dataclass(eq=False)
class Meter:
    """Counts one callback's model calls and checks its budgets.

    ``fire_used`` is what the fire has spent when the caller knows it (a new session: nothing),
    else None (read at the first ``check``); from then on this meter keeps it up to date."""

    store: UsageStore
    clock: Clock
    service: ServiceConfig
    inbox: Inbox
    events: Events | None
    callback_id: str
    watcher_id: str
    session_key: str
    watcher_budget: WatcherBudget | None = None
    fire_used: Usage | None = field(default=None)
    _day_budgets: tuple[str, list[Budget]] | None = field(default=None, init=False, repr=False)

    def _budgets(self, day: str) -> list[Budget]:
        """The budgets that apply on ``day``: computed at a day's first check, kept for the rest
        of it (a session checks before every model call)."""
        if self._day_budgets is None or self._day_budgets[0] != day:
            found = budgets_for(
                callback_id=self.callback_id,
                watcher_id=self.watcher_id,
                day=day,
                service=self.service.budgets,
                watcher=self.watcher_budget,
            )
            self._day_budgets = (day, found)
        return self._day_budgets[1]

    async def check(self) -> None:
        """Raise ``BudgetExhausted`` when a budget that applies is spent (one store read of the
        day counters that apply, and of the fire's until known; none when nothing is left to
        read). The first such finding of a day budget opens its escalation."""
        day = utc_day(self.clock.now())
        budgets = self._budgets(day)
        if not budgets:
            return
        fire = fire_key(self.callback_id)
        known = self.fire_used
        wanted = list(dict.fromkeys(b.key for b in budgets if known is None or b.key != fire))
        used = await self.store.get_usage(wanted) if wanted else {}
        if known is None:
            if fire in wanted:
                self.fire_used = used.get(fire, Usage())
        else:
            used[fire] = known
        found = exhausted(budgets, used)
        if found is None:
            return
        budget, which = found
        if self.events is not None:
            self.events.budget_exhausted(self.callback_id, budget.kind, which, watcher_id=self.watcher_id)
        if budget.kind != "fire":
            await self.inbox.create(
                "escalation",
                severity="warning",
                reason=f"budget exhausted: {which}",
                watcher_id=self.watcher_id if budget.kind == "watcher_day" else None,
                callback_id=self.callback_id,
                session_key=self.session_key,
                detail={"budget": budget.which, "scope": budget.kind, "day": day},
                item_id="BU" + sha256_hex(budget.key)[:24].upper(),
            )
        raise BudgetExhausted(budget.kind, which)

    def measure(self, entry: str, call: Call, request: object, reply: ModelReply, started: float) -> Measured:
        """One call of the ``models:`` entry ``entry`` (``started``: its ``perf_counter``): its
        usage as the transcript records it, and the counters to add it to (the caller writes
        them, then calls ``counted``)."""
        elapsed_ms = (time.perf_counter() - started) * 1000
        spec = self.service.models.get(entry)
        pricing = None if spec is None else spec.pricing
        usage, estimated = call_usage(
            reply.usage,
            request=request,
            reply_text=reply.text,
            reply_calls=[c.to_json() for c in reply.tool_calls],
            prices=None if pricing is None else (pricing.input_per_m_tok, pricing.output_per_m_tok),
        )
        keys = counted_keys(
            callback_id=self.callback_id,
            watcher_id=self.watcher_id,
            day=utc_day(self.clock.now()),
            model=entry,
        )
        recorded = {"call": call, "entry": entry, **usage.to_json(), "elapsedMs": round(elapsed_ms, 1)}
        if estimated:
            recorded["estimated"] = True
        return Measured(recorded, UsageCount(tuple(keys), usage, COUNTER_TTL_MS))

    def counted(self, measured: Measured) -> None:
        """``measured`` is in the store's counters: the fire's known spend grows, events are told."""
        if self.fire_used is not None:
            self.fire_used += measured.count.usage
        if self.events is not None:
            self.events.model_call(
                self.callback_id, measured.recorded["entry"], measured.recorded, watcher_id=self.watcher_id
            )

    async def record(
        self, entry: str, call: Call, request: object, reply: ModelReply, started: float
    ) -> dict[str, Any]:
        """Count one call (``measure``) in its own store step and return its usage as the
        transcript records it."""
        measured = self.measure(entry, call, request, reply, started)
        count = measured.count
        await self.store.add_usage(count.keys, count.usage, at=self.clock.now(), ttl_ms=count.ttl_ms)
        self.counted(measured)
        return measured.recorded


def transcript_usage(entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every model call a callback's transcript entries record, in order: its turns, compaction
    summaries and the judge verdicts of its policy decisions."""
    calls: list[dict[str, Any]] = []
    for entry in entries:
        if isinstance(entry.get("usage"), dict):
            calls.append(entry["usage"])
        for verdict in entry.get("verdicts") or ():
            if isinstance(verdict, dict) and isinstance(verdict.get("usage"), dict):
                calls.append(verdict["usage"])
    return calls


def total(calls: Sequence[Mapping[str, Any]]) -> Usage:
    """The sum of recorded calls."""
    found = Usage()
    for call in calls:
        found += Usage.from_json(call)
    return found


def limit_json(limit: Limit) -> dict[str, Any]:
    return {"tokens": limit.tokens, "usd": limit.usd}


async def day_usage(
    store: UsageStore, service: ServiceConfig, watchers: Mapping[str, WatcherBudget], at: datetime
) -> dict[str, Any]:
    """Today's (UTC) model usage for ``sentinel status``: per model entry, the service's total
    against ``budgets.perDay``, and each watcher with a day budget (``watchers``) against it."""
    day = utc_day(at)
    models = [name for name, spec in service.models.items() if spec.type != "scripted"]
    with_day = {wid: budget for wid, budget in watchers.items() if budget.per_day.applies}
    keys = [
        service_day_key(day),
        *(model_day_key(name, day) for name in models),
        *(watcher_day_key(wid, day) for wid in with_day),
    ]
    used = await store.get_usage(keys)

    def of(key: str) -> dict[str, Any]:
        return used.get(key, Usage()).to_json()

    return {
        "day": day,
        "models": {name: of(model_day_key(name, day)) for name in models},
        "service": {**of(service_day_key(day)), "perDay": limit_json(service.budgets.per_day)},
        "watchers": {
            wid: {**of(watcher_day_key(wid, day)), "perDay": limit_json(budget.per_day)}
            for wid, budget in sorted(with_day.items())
        },
    }
