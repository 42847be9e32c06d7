"""What the multi-replica chaos test (and bench/scale.py) run against, and how its results are judged.

``LocalHttp`` is one aiohttp server on 127.0.0.1, in a thread of its own so the test's blocking
process control never stalls it: ``GET /poll/{watcherId}`` is the watched endpoint (a counter that
changes every ``period_s``, so a ``changed`` condition fires repeatedly; it records which replica
asked, from the ``X-Replica`` header) and ``POST /deliver`` is the webhook target (it records the
``callbackId`` and ``Idempotency-Key`` of every delivery).

The checks are plain functions over those records and the stored contracts, so a test can show
that each one catches the violation it is meant to catch.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class Poll:
    watcher_id: str
    replica: str
    at: float  # time.monotonic()


@dataclass(frozen=True)
class Received:
    callback_id: str
    key: str  # Idempotency-Key: {callbackId}:{target}:{kind}
    at: float
    page: bool = True  # the body's ``page``: false on a follow-up of the fallback (SPEC §6.4)

    @property
    def kind(self) -> str:
        return self.key.rsplit(":", 1)[-1]


@dataclass
class LocalHttp:
    """The watched endpoint and the delivery sink, served from a background thread."""

    period_s: float = 8.0
    polls: list[Poll] = field(default_factory=list)
    deliveries: list[Received] = field(default_factory=list)
    frozen: dict[str, int] | None = None
    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _runner: web.AppRunner | None = None

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def value(self, watcher_id: str) -> int:
        """The counter a watcher sees: changes every ``period_s``, at a per-watcher phase."""
        if self.frozen is not None:
            return self.frozen.get(watcher_id, 0)
        phase = (hash(watcher_id) % 1000) / 1000 * self.period_s
        return int((time.time() + phase) // self.period_s)

    def freeze(self, watcher_ids: Iterable[str]) -> None:
        """From now on every watcher sees the same value: no more fires."""
        self.frozen = {w: self.value(w) for w in watcher_ids}

    async def _poll(self, request: web.Request) -> web.StreamResponse:
        watcher_id = request.match_info["watcher_id"]
        self.polls.append(Poll(watcher_id, request.headers.get("X-Replica", "?"), time.monotonic()))
        return web.json_response({"n": self.value(watcher_id)})

    async def _deliver(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        key = request.headers.get("Idempotency-Key", "")
        page = body.get("page") is not False
        self.deliveries.append(Received(str(body.get("callbackId")), key, time.monotonic(), page))
        return web.json_response({"ok": True})

    def start(self) -> None:
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            app = web.Application()
            app.router.add_get("/poll/{watcher_id}", self._poll)
            app.router.add_post("/deliver", self._deliver)
            self._runner = web.AppRunner(app, access_log=None)
            loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=1024)
            loop.run_until_complete(site.start())
            self.port = self._runner.addresses[0][1]
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, name="local-http", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the local HTTP server did not start")

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)


# -- the checks ------------------------------------------------------------------------------------


def overlapping_polls(polls: Iterable[Poll], interval_s: float) -> list[tuple[str, str, str, float]]:
    """Polls of a watcher by one replica inside another replica's polling interval.

    While replica A owns a watcher its polls come ``interval_s`` apart; a poll by B strictly
    between two consecutive polls of A that are at most 1.5 intervals apart means both polled it
    in the same interval. A hand-off (A's last poll, then B's) is not one.
    Returns (watcher, A, B, seconds after A's poll) per violation.
    """
    by_watcher: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for poll in polls:
        by_watcher[poll.watcher_id][poll.replica].append(poll.at)
    found: list[tuple[str, str, str, float]] = []
    for watcher_id, replicas in by_watcher.items():
        for times in replicas.values():
            times.sort()
        for owner, times in replicas.items():
            for first, second in itertools.pairwise(times):
                if second - first > 1.5 * interval_s:
                    continue
                for other, theirs in replicas.items():
                    if other == owner:
                        continue
                    i = bisect.bisect_right(theirs, first)
                    if i < len(theirs) and theirs[i] < second:
                        found.append((watcher_id, owner, other, round(theirs[i] - first, 3)))
    return found


@dataclass
class Outcomes:
    """Every settled contract against what reached the sink."""

    contracts: int = 0
    fulfilled: int = 0
    fallback_sent: int = 0
    deduped: int = 0
    other_states: Counter[str] = field(default_factory=Counter)
    missing: list[str] = field(default_factory=list)  # no outcome delivered
    doubled: list[str] = field(default_factory=list)  # more than one distinct outcome key
    wrong_kind: list[str] = field(default_factory=list)  # e.g. fulfilled but the fallback arrived
    unknown: list[str] = field(default_factory=list)  # delivered for no (or a deduped) contract
    late_notify: list[str] = field(default_factory=list)  # fallback_sent, and a notify paged too
    follow_ups: int = 0  # notifies delivered as follow-ups of a fallback (SPEC §6.4): fine
    notify_first: int = 0  # of those, how many notifies arrived before the fallback
    redelivered: int = 0  # the same Idempotency-Key received again (at-least-once retries)
    late: list[tuple[str, float]] = field(default_factory=list)  # settledAt - deadline > allowed

    def violations(self) -> dict[str, Any]:
        return {
            name: value
            for name, value in {
                "not settled": dict(self.other_states),
                "no outcome delivered": self.missing[:10],
                "two outcomes": self.doubled[:10],
                "wrong kind": self.wrong_kind[:10],
                "delivered for no contract": self.unknown[:10],
                "settled late": self.late[:10],
            }.items()
            if value
        }


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def judge(contracts: list[dict[str, Any]], received: list[Received], *, late_after_s: float) -> Outcomes:
    """One delivered outcome per fire (notify for fulfilled, fallback for fallback_sent), none
    for deduped contracts, and every contract settled at most ``late_after_s`` after its deadline.

    A notify delivered for a ``fallback_sent`` contract is an agent that answered past its
    deadline: as a follow-up of the fallback (``page`` false) it is counted in ``follow_ups`` and
    is not an outcome; as a page (``late_notify``, counted apart) it reached people as well as the
    fallback. Any other second outcome, such as a fallback for a fulfilled contract, is
    ``doubled``."""
    result = Outcomes()
    keys: dict[str, set[str]] = defaultdict(set)
    seen: Counter[str] = Counter()
    first: dict[str, float] = {}  # key -> first arrival
    for delivery in received:
        seen[delivery.key] += 1
        first.setdefault(delivery.key, delivery.at)
        if not delivery.page and delivery.kind.startswith("notify"):
            result.follow_ups += seen[delivery.key] == 1
            continue
        keys[delivery.callback_id].add(delivery.key)
    result.redelivered = sum(n - 1 for n in seen.values())
    fires: set[str] = set()
    for contract in contracts:
        callback_id, state = contract["callbackId"], contract["state"]
        if state == "deduped":
            result.deduped += 1
            continue
        result.contracts += 1
        fires.add(callback_id)
        expected = {"fulfilled": "notify", "fallback_sent": "fallback"}.get(state)
        if expected is None:
            result.other_states[state] += 1
            continue
        setattr(result, state, getattr(result, state) + 1)
        got = keys.get(callback_id, set())
        target = next(iter(got)).split(":")[1] if got else "?"
        fallback, notify = f"{callback_id}:{target}:fallback", f"{callback_id}:{target}:notify"
        if not got:
            result.missing.append(callback_id)
        elif state == "fallback_sent" and got == {fallback, notify}:
            result.late_notify.append(callback_id)
            result.notify_first += first[notify] < first[fallback]
        elif len(got) > 1:
            result.doubled.append(f"{callback_id}: {sorted(got)}")
        elif next(iter(got)).rsplit(":", 1)[-1] != expected:
            result.wrong_kind.append(f"{callback_id}: {state} but {next(iter(got))}")
        settled_at = contract.get("settledAt")
        if settled_at:
            lateness = (instant(settled_at) - instant(contract["deadline"])).total_seconds()
            if lateness > late_after_s:
                result.late.append((callback_id, round(lateness, 3)))
    result.unknown = sorted(set(keys) - fires)
    return result
