"""The noise report (SPEC §22): what the fires of a window did, per watcher and in total.

One computation, read by ``sentinel report`` (through the API), ``GET /api/v1/report`` and the web
page's Report view, so the three always show the same figures. It reads only what the store
already keeps (contracts, their deliveries, inbox items and their history, usage counters and
feedback), so any window inside ``retention.callbacksDays`` can be asked for, on either store.

Definitions (docs/evidence.md, "Report"):

* fires: contracts created in the window; pages: those settled ``fulfilled`` (by the agent) or
  ``fallback_sent`` (the fallback); ``deduped``, ``silenced``, ``grouped`` by their final state.
* time to page: ``settledAt`` minus ``createdAt`` of a paged fire.
* time to ack / resolve: from the fire to its inbox item's first ``acked`` / ``resolved``
  (resolve also: the fire settled ``resolved``, or its ``resolved`` line sent).
* follow-ups: a fire's follow-up deliveries, one per kind; escalation steps: ``escalation.N``
  kinds delivered.
* flapping: a watcher with three or more fires that were resolved on one UTC day.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from sentinel_hooks.clock import iso
from sentinel_hooks.core.usage import Usage, fire_key
from sentinel_hooks.store.base import ContractStore, FeedbackStore, InboxStore, OutboxStore, UsageStore
from sentinel_hooks.store.feedback import FeedbackCounts
from sentinel_hooks.store.records import Contract, Delivery, InboxItem, escalation_step

PAGE_SIZE = 500
CONCURRENT_READS = 16
NOISIEST = 10
FLAPPING_CYCLES = 3
_SPAN = re.compile(r"(\d+)(m|h|d|w)")
_SPAN_MS = {"m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


class ReportRoles(ContractStore, OutboxStore, InboxStore, UsageStore, FeedbackStore, Protocol):
    """The store roles the report reads."""


def parse_since(text: str) -> timedelta:
    """``7d``, ``24h``, ``90m``, ``2w`` (or ``1d12h``) as a window length; ValueError otherwise."""
    cleaned = text.strip().lower()
    parts = _SPAN.findall(cleaned)
    if not parts or "".join(n + u for n, u in parts) != cleaned:
        raise ValueError(f"since: {text!r} is not a window; write e.g. 90m, 24h, 7d or 2w")
    total = sum(int(n) * _SPAN_MS[u] for n, u in parts)
    if total < 1:
        raise ValueError(f"since: {text!r} is no time at all; write e.g. 24h or 7d")
    return timedelta(milliseconds=total)


def percentiles(values: Sequence[float]) -> dict[str, float | None]:
    """``{p50, p90}`` by nearest rank (None when there are no values), in seconds."""
    if not values:
        return {"p50": None, "p90": None}
    ordered = sorted(values)

    def rank(p: float) -> float:
        index = max(0, min(len(ordered) - 1, -(-len(ordered) * p // 100) - 1))
        return round(ordered[int(index)], 3)

    return {"p50": rank(50), "p90": rank(90)}


@dataclass
class _Figures:
    """The counts of one watcher (or of all), summed over its fires."""

    fires: int = 0
    states: Counter[str] = field(default_factory=Counter)
    follow_ups: int = 0
    escalation_steps: int = 0
    usage: Usage = field(default_factory=Usage)
    useful: int = 0
    not_useful: int = 0
    to_page: list[float] = field(default_factory=list)
    to_ack: list[float] = field(default_factory=list)
    to_resolve: list[float] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        agent, fallback = self.states["fulfilled"], self.states["fallback_sent"]
        return {
            "fires": self.fires,
            "pages": agent + fallback,
            "pagesByAgent": agent,
            "fallbacks": fallback,
            "deduped": self.states["deduped"],
            "silenced": self.states["silenced"],
            "grouped": self.states["grouped"],
            "resolvedBeforePage": self.states["resolved"],
            "followUps": self.follow_ups,
            "escalationSteps": self.escalation_steps,
            "timeToPageS": percentiles(self.to_page),
            "timeToAckS": percentiles(self.to_ack),
            "timeToResolveS": percentiles(self.to_resolve),
            "usage": self.usage.to_json(),
            "feedback": {"useful": self.useful, "notUseful": self.not_useful},
        }


@dataclass(frozen=True)
class _Fire:
    """One fire and what became of it."""

    contract: Contract
    deliveries: list[Delivery]
    item: InboxItem | None
    acked: datetime | None
    resolved: datetime | None


async def _contracts(store: ReportRoles, since: datetime, until: datetime) -> list[Contract]:
    found: list[Contract] = []
    cursor: str | None = None
    while True:
        page = await store.list_contracts(limit=PAGE_SIZE, cursor=cursor)
        found += [c for c in page.items if since <= c.created_at < until]
        if page.next_cursor is None or (page.items and page.items[-1].created_at < since):
            return found
        cursor = page.next_cursor


async def _items(store: ReportRoles, since: datetime) -> dict[str, InboxItem]:
    """Inbox items made since ``since`` about a fire, by callback id (the first one made)."""
    found: dict[str, InboxItem] = {}
    cursor: str | None = None
    while True:
        page = await store.list_inbox(limit=PAGE_SIZE, cursor=cursor)
        for item in page.items:
            if item.created_at >= since and item.callback_id and item.kind == "escalation":
                found[item.callback_id] = item
        if page.next_cursor is None or (page.items and page.items[-1].created_at < since):
            return found
        cursor = page.next_cursor


async def _fire(
    store: ReportRoles, contract: Contract, item: InboxItem | None, gate: asyncio.Semaphore
) -> _Fire:
    async with gate:
        deliveries = await store.list_deliveries(contract.callback_id)
        history = await store.inbox_history(item.id) if item is not None else []
    acked = next((h.at for h in history if h.to_status == "acked"), None)
    resolved_at = [h.at for h in history if h.to_status == "resolved"]
    resolved_at += [d.updated_at for d in deliveries if d.kind == "resolved" and d.state == "delivered"]
    if contract.state == "resolved" and contract.settled_at is not None:
        resolved_at.append(contract.settled_at)
    return _Fire(contract, deliveries, item, acked, min(resolved_at, default=None))


def _add(figures: _Figures, fire: _Fire, usage: Usage, feedback: FeedbackCounts) -> None:
    c = fire.contract
    figures.fires += 1
    figures.states[c.state] += 1
    figures.follow_ups += len({d.kind for d in fire.deliveries if d.message.get("follow_up") is True})
    figures.escalation_steps += len(
        {d.kind for d in fire.deliveries if escalation_step(d.kind) is not None and d.state == "delivered"}
    )
    figures.usage = figures.usage + usage
    figures.useful += feedback.useful
    figures.not_useful += feedback.not_useful
    if c.state in ("fulfilled", "fallback_sent") and c.settled_at is not None:
        figures.to_page.append((c.settled_at - c.created_at).total_seconds())
    if fire.acked is not None:
        figures.to_ack.append((fire.acked - c.created_at).total_seconds())
    if fire.resolved is not None:
        figures.to_resolve.append((fire.resolved - c.created_at).total_seconds())


def _flapping(fires: Iterable[_Fire]) -> list[dict[str, Any]]:
    """Watchers with ``FLAPPING_CYCLES`` or more resolved fires on one UTC day, most cycles first."""
    cycles: Counter[tuple[str, str]] = Counter(
        (f.contract.watcher_id, f.contract.created_at.date().isoformat())
        for f in fires
        if f.resolved is not None
    )
    worst: dict[str, tuple[int, str]] = {}
    for (watcher, day), count in cycles.items():
        if count >= FLAPPING_CYCLES and (count, day) > worst.get(watcher, (0, "")):
            worst[watcher] = (count, day)
    ranked = sorted(worst.items(), key=lambda w: (-w[1][0], w[0]))
    return [{"watcherId": w, "cycles": count, "day": day} for w, (count, day) in ranked]


async def build_report(store: ReportRoles, *, since: datetime, until: datetime) -> dict[str, Any]:
    """The report of the fires created in ``[since, until)`` (the API's JSON shape)."""
    contracts = await _contracts(store, since, until)
    items = await _items(store, since)
    gate = asyncio.Semaphore(CONCURRENT_READS)
    fires = await asyncio.gather(*(_fire(store, c, items.get(c.callback_id), gate) for c in contracts))
    ids = [c.callback_id for c in contracts]
    usage = await store.get_usage([fire_key(cid) for cid in ids])
    feedback = await store.get_feedback(ids)
    total = _Figures()
    per_watcher: dict[str, _Figures] = defaultdict(_Figures)
    for fire in fires:
        cid = fire.contract.callback_id
        spent = usage.get(fire_key(cid), Usage())
        counts = FeedbackCounts.of(feedback.get(cid, []))
        _add(total, fire, spent, counts)
        _add(per_watcher[fire.contract.watcher_id], fire, spent, counts)
    noisiest = sorted(per_watcher.items(), key=lambda w: (-w[1].fires, w[0]))[:NOISIEST]
    return {
        "since": iso(since),
        "until": iso(until),
        "total": total.to_json(),
        "watchers": {w: figures.to_json() for w, figures in sorted(per_watcher.items())},
        "noisiest": [{"watcherId": w, "fires": figures.fires} for w, figures in noisiest],
        "flapping": _flapping(fires),
    }
