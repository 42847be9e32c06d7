"""A model-based test of the response contract (SPEC.md §6.1): one message per fire, under faults.

``ContractMachine`` is a Hypothesis ``RuleBasedStateMachine``. It builds a real ``Service``
(store: SQLite or Redis; two ``webhook`` targets pointing at a real HTTP sink on 127.0.0.1; a
``FakeClock``) and drives its relay, outbox and store without their background loops, so every
interleaving it draws can be replayed. It plays the agent itself, calling the real tools of a
callback (``ToolBox``) the way a hook session would.

Every fire also goes to a ``pagerduty`` target (a real Events API stand-in on 127.0.0.1).

Rules: fire; notify (each target answers from a plan: accept, fail k times then accept, fail for
good with 503s, or 400) — before the page, or after it (a follow-up, SPEC §6.4); a notify racing
a relay pass; the source reporting the fire over (notifyResolved on or off), before the page
(the contract settles ``resolved``) or after it (a follow-up line), alone or racing a relay pass;
escalate; ask for an approval, approve, deny, let it time out; time passing (the relay and the
outbox then run, as their loops would at least every 0.5 s); extra relay and outbox passes; a
restart that rebuilds every component from the store; a crash while a notify is in flight (the
target got it, the answer never came back), after which the agent's tool call is run again as a
resumed session would.

Invariants, after every step: a contract that reached a final state keeps it; at most one page
per contract: a fulfilled contract's people never get the fallback nor a "resolved before the
agent answered" line, a fallback_sent one's never get that line nor an agent message handed
before the fallback, a resolved one's never get the fallback (no page after ``resolved``); a
notify after ``resolved`` is refused with "the fire resolved" and sent nowhere; with
``follow_ups``, a notify after the page is never refused; a message never travels under two keys,
nor a key with two messages; a notify reported delivered has arrived; a fallback leaves at most 1 s
after its deadline (or after its notify finally failed) and never while an approval is open;
PagerDuty never gets a ``trigger`` after the ``resolve`` of its dedup_key. At the end (teardown)
time runs on until nothing is left to do; then every contract is final, every fire reached people
exactly once (its page), and every follow-up arrived exactly once at each target that accepts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import shutil
import tempfile
from collections.abc import Awaitable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import redis
from aiohttp import web
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from sentinel_hooks.callbacks.backends.base import ToolCall
from sentinel_hooks.callbacks.sessions.progress import progress_key
from sentinel_hooks.callbacks.sessions.tools import Paused, ToolBox
from sentinel_hooks.clock import FakeClock, iso
from sentinel_hooks.config.loader import LoadedConfig, load_config
from sentinel_hooks.core.envelope import Envelope, new_callback_id
from sentinel_hooks.delivery.targets.pagerduty import PACE_LIMIT
from sentinel_hooks.errors import Conflict
from sentinel_hooks.relay.fallback import STILL_INVESTIGATING
from sentinel_hooks.service import Service
from sentinel_hooks.store.records import Contract
from sentinel_hooks.watchers.lifecycle import resolved_message
from tests.delivery.pagerduty_api import ROUTING_KEY, PagerDutyApi
from tests.relay.contract_model_sessions import SessionFaults
from tests.relay.rig import toolbox_for
from tests.support import Endpoint

T = TypeVar("T")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
TIMEOUT_S = 3.0
APPROVAL_TIMEOUT_S = 4.0
SESSION_MAX_S = 4.0  # hookSessionMaxMs: a session may outlive its deadline (3 s) by a second
MAX_LATE = timedelta(seconds=1)
FINAL = frozenset({"fulfilled", "fallback_sent", "expired", "resolved", "deduped"})
TARGETS = ("a", "b")
EVERY_TARGET = ("a", "b", "pd")
OPEN = frozenset({"pending", "notifying", "awaiting_approval"})
PAGED = frozenset({"fulfilled", "fallback_sent"})
FOLLOWED = PAGED | {"expired", "notifying"}  # a notify then is a follow-up (SPEC §6.4)
BEFORE_THE_AGENT = "before the agent answered."  # the end of a fire's line resolved before its page

CONFIG = """\
store: {store}
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: {timeout_ms}
hookResponseDedupeWindowMs: 0
hookSessionMaxMs: {session_ms}
notificationPayloadMode: none
delivery: {{maxAttempts: 3, baseMs: 200, maxMs: 800, maxElapsedMs: 600000}}
actionPolicy: {{default: needs_approval, approvalTimeoutMs: {approval_ms}}}
limits: {{requestTimeoutMs: 2000}}
targets:
  a: {{type: webhook, url: "{url}/a"}}
  b: {{type: webhook, url: "{url}/b"}}
  pd: {{type: pagerduty, routingKey: "{routing_key}", apiBase: "{pd}"}}
"""

WATCHER = """\
id: disk
strategy: webhook
conditions: [{path: n, op: gte, value: 0}]
fire: {eventName: disk_full, priority: high}
deliveryTargets: [a, b, pd]
"""

# How a target answers one message: one word per attempt (then it accepts).
ANSWERS = st.sampled_from(
    [("ok",), ("fail", "ok"), ("fail", "fail", "ok"), ("fail", "fail", "fail"), ("reject",)]
)
STATUS = {"ok": 200, "fail": 503, "reject": 400}


@dataclass
class Received:
    """One request at the sink."""

    path: str
    key: str
    text: str
    status: int
    page: bool | None = None  # the body's ``page`` (SPEC §6.4)

    @property
    def callback_id(self) -> str:
        return self.key.split(":", 1)[0]

    @property
    def kind(self) -> str:
        return self.key.rsplit(":", 1)[1]

    @property
    def accepted(self) -> bool:
        return self.status < 300


class ScriptedSink(Endpoint):
    """The targets' receiver: answers each message from its plan and records every request.

    A ``hang`` answer means the receiver took the message (recorded as accepted) but the answer
    never reaches the sender: the request is held until ``release()``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.plans: dict[tuple[str, str], list[str]] = {}
        self.received: list[Received] = []
        self.hanging = 0
        self._release = asyncio.Event()
        self._hung = asyncio.Event()
        self.handler = self._answer

    def reset(self) -> None:
        """Forget the previous example's plans and requests."""
        self.plans.clear()
        self.received.clear()
        self.hanging = 0

    def plan(self, path: str, text: str, answers: tuple[str, ...]) -> None:
        self.plans[(path, text)] = list(answers)

    async def first_hang(self, task: asyncio.Task[Any]) -> None:
        """Return once a request hangs here, or ``task`` (its sender) has finished."""
        hung = asyncio.get_running_loop().create_task(self._hung.wait())
        await asyncio.wait([task, hung], return_when=asyncio.FIRST_COMPLETED)
        hung.cancel()

    def release(self) -> None:
        self._release.set()
        self._release = asyncio.Event()
        self._hung = asyncio.Event()

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        body = json.loads(await request.read())
        key = request.headers.get("Idempotency-Key", "")
        text = str(body.get("message", ""))
        plan = self.plans.get((request.path, text)) or self.plans.get((request.path, key.split(":")[0]))
        answer = plan.pop(0) if plan else "ok"
        if answer == "hang":
            self.received.append(Received(request.path, key, text, 200, body.get("page")))
            self.hanging += 1
            self._hung.set()
            await self._release.wait()
            self.hanging -= 1
            return web.json_response({"ok": True})
        status = STATUS[answer]
        self.received.append(Received(request.path, key, text, status, body.get("page")))
        return web.json_response({"ok": status < 300}, status=status)


@dataclass
class Callback:
    """What the model knows of one fire."""

    contract: Contract
    envelope: Envelope
    box: ToolBox
    deadline: datetime
    notified: int = 0
    reported: list[tuple[str, list[str]]] = field(default_factory=list)  # (text, targets said delivered)
    refused: list[str] = field(default_factory=list)  # texts of notifies refused as too late
    handed_open: list[str] = field(default_factory=list)  # notifies handed while nothing paged yet
    follow_ups: list[tuple[str, list[str]]] = field(default_factory=list)  # (text, targets it reaches)
    resolution: tuple[str, str, bool] | None = None  # (state before, after, notifyResolved)
    approval: str | None = None
    approvals: list[tuple[datetime, datetime | None]] = field(default_factory=list)  # open intervals
    escalated_in_time: bool = False  # escalated while the contract was still open
    stopped: str | None = None  # the session was stopped: "time" (hookSessionMaxMs) or "budget"
    budget_line: str | None = None  # a budget stop made the fallback due at once, naming this
    stopped_open: bool = False  # stopped before the contract settled: no fallback says "still…"
    final: tuple[str, datetime | None] | None = None

    @property
    def cid(self) -> str:
        return self.contract.callback_id


class Counts:
    """Examples and steps run, per store (printed by the test)."""

    def __init__(self) -> None:
        self.examples: dict[str, int] = {}
        self.steps: dict[str, int] = {}
        self.outcomes: dict[str, dict[str, int]] = {}

    def add(self, store: str, steps: int, outcomes: dict[str, int]) -> None:
        self.examples[store] = self.examples.get(store, 0) + 1
        self.steps[store] = self.steps.get(store, 0) + steps
        seen = self.outcomes.setdefault(store, {})
        for state, n in outcomes.items():
            seen[state] = seen.get(state, 0) + n


COUNTS = Counts()


class World:
    """What every example of one test shares: the event loop, the sink, the loaded config and the
    store's location (emptied before each example). Loading the config once keeps examples fast."""

    def __init__(self, kind: str, redis_url: str | None = None) -> None:
        self.kind = kind
        self.redis_url = redis_url
        self.loop = asyncio.new_event_loop()
        self.dir = Path(tempfile.mkdtemp(prefix="sentinel-model-"))
        self.sink = ScriptedSink()
        self.loop.run_until_complete(self.sink.start())
        self.pagerduty = PagerDutyApi()
        self.loop.run_until_complete(self.pagerduty.start())
        store = "sqlite:///state.db" if kind == "sqlite" else str(redis_url)
        (self.dir / "sentinel.yaml").write_text(
            CONFIG.format(
                store=store,
                url=self.sink.url("").rstrip("/"),
                timeout_ms=int(TIMEOUT_S * 1000),
                approval_ms=int(APPROVAL_TIMEOUT_S * 1000),
                session_ms=int(SESSION_MAX_S * 1000),
                routing_key=ROUTING_KEY,
                pd=self.pagerduty.base(),
            )
        )
        (self.dir / "watchers").mkdir()
        (self.dir / "watchers" / "disk.yaml").write_text(WATCHER)
        self.config = load_config(self.dir / "sentinel.yaml", environ={})
        self.watcher = next(w.spec for w in self.config.watchers if w.spec.id == "disk")

    def forget_state(self) -> None:
        """Empty the store before an example (the previous one closed it)."""
        forget_store(self.redis_url, self.dir)

    def close(self) -> None:
        self.loop.run_until_complete(self.sink.stop())
        self.loop.run_until_complete(self.pagerduty.close())
        self.loop.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class ContractMachine(SessionFaults, RuleBasedStateMachine):
    """See the module docstring. ``world`` is set before a run (``World``)."""

    world: World | None = None
    follow_ups = True  # a notify after the page is a follow-up (SPEC §6.4), never refused

    callbacks = Bundle("callbacks")

    def __init__(self) -> None:
        super().__init__()
        world = self.world
        assert world is not None, "set ContractMachine.world (a World) before running the machine"
        self.loop = world.loop
        self.clock = FakeClock(T0)
        self.steps = 0
        self.texts = itertools.count(1)
        self.cbs: dict[str, Callback] = {}
        self.outcomes: dict[str, int] = {}
        self.sink = world.sink
        self.sink.reset()
        self.plans: dict[tuple[str, str], tuple[str, ...]] = {}  # every notify's plans, kept
        self.pagerduty = world.pagerduty
        self.pagerduty.events.clear()
        self.pagerduty.alerts.clear()
        self.pagerduty.accepted_at.clear()
        self.pagerduty.throttled = 0
        self.pagerduty.limit_per_minute, self.pagerduty.clock = PACE_LIMIT, self.clock
        world.forget_state()
        self.abandoned = []
        self.replica = None
        self.service = self.run(self.build())

    # -- plumbing ------------------------------------------------------------------------------

    def run(self, awaitable: Awaitable[T]) -> T:
        return self.loop.run_until_complete(awaitable)

    async def build(self) -> Service:
        """A Service over the same store, started only as far as the model needs: no loops."""
        assert self.world is not None
        return await model_service(self.world.config, self.clock)

    def toolbox(self, contract: Contract, envelope: Envelope, notified: int = 0) -> ToolBox:
        return toolbox_for(self.service, contract, envelope, notified)

    async def outbox_pass(self) -> None:
        await outbox_pass(self.service)

    async def relay_pass(self) -> None:
        await self.service.relay.settle_due()

    async def sweep_approvals(self) -> None:
        await self.service.sessions.approvals.expire_overdue()
        for cb in self.cbs.values():
            if cb.approval is None:
                continue
            item = await self.service.store.get_inbox_item(cb.approval)
            if item is not None and item.status != "open":
                self.closed_approval(cb)

    def closed_approval(self, cb: Callback) -> None:
        if cb.approvals and cb.approvals[-1][1] is None:  # it held the contract: a new deadline
            start, _ = cb.approvals[-1]
            cb.approvals[-1] = (start, self.clock.now())
            cb.deadline = self.clock.now() + timedelta(seconds=TIMEOUT_S)
        cb.approval = None

    async def passes(self, relay_first: bool) -> None:
        """What the service's loops do whenever time passes (at least every 0.5 s)."""
        if relay_first:
            await self.relay_pass()
        await self.outbox_pass()
        if not relay_first:
            await self.relay_pass()
        await self.sweep_approvals()

    async def advance(self, seconds: float, relay_first: bool = True) -> None:
        while seconds > 1e-9:
            step = min(0.5, seconds)
            self.clock.advance(step)
            seconds -= step
            await self.passes(relay_first)

    async def state(self, cid: str) -> Contract:
        found = await self.service.store.get_contract(cid)
        assert found is not None, f"contract {cid} disappeared"
        return found

    def new_text(self, cb: Callback) -> str:
        return f"{cb.cid[-6:]} agent message {next(self.texts)}"

    async def notify(self, cb: Callback, a: tuple[str, ...], b: tuple[str, ...], to: list[str]) -> None:
        before = (await self.state(cb.cid)).state
        text = self.new_text(cb)
        self.sink.plan("/a", text, a)
        self.sink.plan("/b", text, b)
        self.plans[("/a", text)], self.plans[("/b", text)] = a, b
        call = ToolCall(f"n{text}", "sentinel_act", {"action": "notify", "message": text, "targets": to})
        result = await cb.box.execute(call, history=[])
        self.record_notify(cb, text, before, result, to)

    def record_notify(
        self, cb: Callback, text: str, before: str, result: dict[str, Any], to: list[str] | None = None
    ) -> None:
        handed = isinstance(result.get("notify"), int)
        if before == "resolved":
            assert {"ok": False, "error": "the fire resolved"} == result, f"a notify after resolved: {result}"
        if before in FOLLOWED and self.follow_ups:
            assert handed, f"a follow-up (a notify after {before}) was refused: {result}"
            assert "followup" == result.get("deliveredAs"), f"a notify after {before} was not a follow-up"
        if not handed:
            cb.refused.append(text)
            return
        cb.notified = max(cb.notified, result["notify"])  # handed over: the next is the next ordinal
        if result.get("deliveredAs") == "followup":
            cb.follow_ups.append((text, [t for t in (to or EVERY_TARGET) if t in TARGETS]))
        else:
            assert before in OPEN, f"a notify after {before} was handed over as a page: {result}"
            cb.handed_open.append(text)
        cb.reported.append((text, list(result.get("delivered") or [])))

    # -- rules ---------------------------------------------------------------------------------

    @rule(
        target=callbacks,
        fallback_a=st.integers(0, 2),
        fallback_b=st.integers(0, 2),
        mode=st.sampled_from(["concise", "concise", "concise", "none"]),
    )
    def fire(self, fallback_a: int, fallback_b: int, mode: str) -> str:
        """A watcher fires: a pending contract (its fallback's targets may fail a few times;
        with fallback mode ``none`` a silent agent's contract expires instead)."""
        self.steps += 1
        cid = new_callback_id()
        now = self.clock.now()
        envelope = Envelope.model_validate(
            {
                "callbackId": cid,
                "watcher": {"id": "disk", "eventName": "disk_full"},
                "trigger": {"kind": "match", "matchedAt": iso(now), "priority": "high"},
                "payload": {"n": len(self.cbs)},
                "delivery": {
                    "targets": list(EVERY_TARGET),
                    "timeoutMs": int(TIMEOUT_S * 1000),
                    "fallbackMode": mode,
                },
            }
        )
        self.sink.plan("/a", cid, ("fail",) * fallback_a)
        self.sink.plan("/b", cid, ("fail",) * fallback_b)
        contract = self.run(self.service.intake.accept(envelope))
        assert "pending" == contract.state
        self.cbs[cid] = Callback(
            contract, envelope, self.toolbox(contract, envelope), now + timedelta(seconds=TIMEOUT_S)
        )
        self.run(self.session_begins(self.cbs[cid]))
        return cid

    @rule(cid=callbacks, a=ANSWERS, b=ANSWERS, to=st.sampled_from([["a", "b"], ["a"], ["b"]]))
    def notify_rule(self, cid: str, a: tuple[str, ...], b: tuple[str, ...], to: list[str]) -> None:
        """The agent notifies (again, maybe); each target answers from its plan."""
        self.steps += 1
        cb = self.cbs[cid]
        if cb.approval is None and cb.stopped is None:
            self.run(self.notify(cb, a, b, to))

    @rule(cid=callbacks, a=ANSWERS, b=ANSWERS)
    def notify_racing_relay(self, cid: str, a: tuple[str, ...], b: tuple[str, ...]) -> None:
        """A notify and a relay pass at the same moment."""
        self.steps += 1
        cb = self.cbs[cid]
        if cb.approval is None and cb.stopped is None:

            async def both() -> None:
                await asyncio.gather(self.notify(cb, a, b, list(TARGETS)), self.relay_pass())

            self.run(both())

    @rule(cid=callbacks, notify=st.booleans())
    def source_resolves(self, cid: str, notify: bool) -> None:
        """The source reports the fire over (an edge condition turning false, an Alertmanager
        ``resolved`` alert): before the page the contract settles ``resolved``, after it the
        resolved line is a follow-up; ``notify`` is the watcher's notifyResolved."""
        self.steps += 1
        cb = self.cbs[cid]
        if cb.resolution is None:
            self.run(self.resolve(cb, notify, racing=False))

    @rule(cid=callbacks, notify=st.booleans())
    def resolution_racing_relay(self, cid: str, notify: bool) -> None:
        """The source reports the fire over at the moment a relay pass settles deadlines."""
        self.steps += 1
        cb = self.cbs[cid]
        if cb.resolution is None:

            async def both() -> None:
                await asyncio.gather(self.resolve(cb, notify, racing=True), self.relay_pass())

            self.run(both())

    async def resolve(self, cb: Callback, notify: bool, *, racing: bool) -> None:
        assert self.world is not None
        before = (await self.state(cb.cid)).state
        seconds = (self.clock.now() - cb.contract.trigger.matched_at).total_seconds()
        text = resolved_message("disk_full", "disk", seconds) if notify else None
        await self.service.notices.resolved(self.world.watcher, text, cb.cid)
        after = (await self.state(cb.cid)).state
        cb.resolution = (before, after, notify)
        if not racing:
            moves = before == "pending"
            assert moves == (after == "resolved"), f"{cb.cid}: resolved from {before} gave {after}"

    @rule(cid=callbacks)
    def escalate(self, cid: str) -> None:
        """The agent escalates: an inbox item; the fallback, if it comes, says so."""
        self.steps += 1
        cb = self.cbs[cid]
        if cb.approval is not None or cb.stopped is not None:
            return
        before = self.run(self.state(cid)).state
        call = ToolCall("e", "sentinel_escalate", {"reason": "disk grows fast", "severity": "critical"})
        result = self.run(cb.box.execute(call, history=[]))
        assert result["ok"], result
        if before not in FINAL:
            cb.escalated_in_time = True

    @rule(cid=callbacks)
    def request_approval(self, cid: str) -> None:
        """The agent proposes a command the policy sends for approval: the session pauses."""
        self.steps += 1
        cb = self.cbs[cid]
        if cb.approval is not None or cb.stopped is not None:  # a stopped session calls no tool
            return
        before = self.run(self.state(cid)).state
        call = ToolCall(f"c{next(self.texts)}", "sentinel_act", {"action": "run_command", "command": "true"})
        try:
            result = self.run(cb.box.execute(call, history=[]))
        except Paused as paused:
            self.run(pause(self.service, cb.contract, paused))
            cb.approval = paused.item_id
            if before in ("pending", "notifying"):  # the approval now holds the contract
                cb.approvals.append((self.clock.now(), None))
            return
        assert not result["ok"], f"an approval was needed, got {result}"

    @rule(cid=callbacks, approve=st.booleans())
    def decide(self, cid: str, approve: bool) -> None:
        """A person approves or denies the open approval of a callback."""
        self.steps += 1
        cb = self.cbs[cid]
        if cb.approval is None:
            return
        inbox = self.service.inbox
        with contextlib.suppress(Conflict):
            decide = inbox.approve if approve else inbox.deny
            self.run(decide(cb.approval, actor="model", note=None))
        self.closed_approval(cb)

    @rule(seconds=st.sampled_from([0.1, 0.25, 0.5, 1.0, 2.0, 4.0]), relay_first=st.booleans())
    def time_passes(self, seconds: float, relay_first: bool) -> None:
        """Time passes; the relay and outbox loops run as they would."""
        self.steps += 1
        self.run(self.advance(seconds, relay_first))

    @rule()
    def extra_relay_pass(self) -> None:
        self.steps += 1
        self.run(self.relay_pass())

    @rule()
    def extra_outbox_pass(self) -> None:
        self.steps += 1
        self.run(self.outbox_pass())

    @rule()
    def restart(self) -> None:
        """The process dies and starts again: every component is rebuilt from the store."""
        self.steps += 1
        self.run(self.restarted())

    async def restarted(self) -> None:
        old = self.service
        await old.dispatcher.stop(timeout_s=0)  # a send under way dies with the process
        await old.http.close()
        await old.store.close()
        self.service = await self.build()
        for cb in self.cbs.values():
            cb.box = self.toolbox(await self.state(cb.cid), cb.envelope, cb.notified)

    @rule(cid=callbacks, b=ANSWERS)
    def crash_mid_notify(self, cid: str, b: tuple[str, ...]) -> None:
        """The process dies while a notify is in flight: target a took the message but its answer
        never came back. After the restart the session runs the same tool call again."""
        self.steps += 1
        cb = self.cbs[cid]
        if cb.approval is not None or cb.stopped is not None:
            return
        self.run(self.crashed_notify(cb, b))

    async def crashed_notify(self, cb: Callback, b: tuple[str, ...]) -> None:
        before = (await self.state(cb.cid)).state
        text = self.new_text(cb)
        self.sink.plan("/a", text, ("hang", "ok"))
        self.sink.plan("/b", text, b)
        self.plans[("/a", text)], self.plans[("/b", text)] = ("ok",), b
        call = ToolCall(f"n{text}", "sentinel_act", {"action": "notify", "message": text})
        task = asyncio.get_running_loop().create_task(cb.box.execute(call, history=[]))
        await self.sink.first_hang(task)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            result = await task
            self.record_notify(cb, text, before, result)  # it finished before the crash
            return
        await self.service.dispatcher.stop(timeout_s=0)  # the send to a dies unanswered with the process
        self.sink.release()
        await self.restarted()
        result = await cb.box.execute(call, history=[])
        self.record_notify(cb, text, before, result)

    # -- invariants ----------------------------------------------------------------------------

    @invariant()
    def one_message_per_fire(self) -> None:
        self.run(self.check())

    async def check(self) -> None:
        for cb in self.cbs.values():
            current = await self.state(cb.cid)
            if cb.final is not None:
                assert cb.final == (current.state, current.settled_at), (
                    f"{cb.cid} left its final state {cb.final} for {current.state}"
                )
            elif current.state in FINAL:
                cb.final = (current.state, current.settled_at)
            if current.state == "fallback_sent":
                await self.check_fallback_time(cb, current)
        self.check_sink()

    async def check_fallback_time(self, cb: Callback, current: Contract) -> None:
        settled = current.settled_at
        assert settled is not None
        failed = [
            d.updated_at
            for d in await self.service.store.list_deliveries(cb.cid)
            if d.kind.startswith("notify") and d.state == "failed"
        ]
        due = max([cb.deadline, *failed])
        assert settled <= due + MAX_LATE, (
            f"fallback of {cb.cid} sent {(settled - due).total_seconds():.3f} s after it was due"
        )
        for start, end in cb.approvals:
            assert not (start <= settled and (end is None or settled < end)), (
                f"fallback of {cb.cid} sent while its approval was open"
            )

    def check_sink(self) -> None:
        accepted = [r for r in self.sink.received if r.accepted and r.callback_id in self.cbs]
        texts_by_key: dict[str, set[str]] = {}
        keys_by_text: dict[tuple[str, str, str], set[str]] = {}
        for r in accepted:
            texts_by_key.setdefault(r.key, set()).add(r.text)
            keys_by_text.setdefault((r.path, r.callback_id, r.text), set()).add(r.key)
        for key, texts in texts_by_key.items():
            assert len(texts) == 1, f"one key {key} carried {len(texts)} different messages"
        for (path, _, text), keys in keys_by_text.items():
            assert len(keys) == 1, f"message {text!r} reached {path} under {len(keys)} keys: {keys}"
        for cid, cb in self.cbs.items():
            mine = [r for r in accepted if r.callback_id == cid]
            self.check_pages(cb, mine)
            for text, delivered in cb.reported:
                for target in delivered:
                    if target not in TARGETS:
                        continue  # PagerDuty: checked by check_pagerduty
                    assert any(r.text == text and r.path == f"/{target}" for r in mine), (
                        f"{cid}: notify {text!r} was reported delivered to {target} but never arrived"
                    )
            for text in cb.refused:
                assert not any(r.text == text for r in self.sink.received), (
                    f"{cid}: a refused notify was sent anyway"
                )
            if cb.escalated_in_time:
                fallbacks = [r.text for r in mine if r.kind == "fallback"]
                assert all("Escalated (critical)" in t for t in fallbacks), fallbacks
        self.check_pagerduty()

    def check_pages(self, cb: Callback, mine: list[Received]) -> None:
        """At most one page per contract, and none after ``resolved`` (SPEC §6.4)."""
        state = cb.final[0] if cb.final is not None else None
        fallback = any(r.kind == "fallback" for r in mine)
        resolved_page = any(r.kind == "resolved" and r.text.endswith(BEFORE_THE_AGENT) for r in mine)
        agent_page = any(r.kind.startswith("notify") and r.text in cb.handed_open for r in mine)
        pages = [name for name, got in (("fallback", fallback), ("resolved", resolved_page)) if got]
        pages += ["the agent's message"] if agent_page else []
        assert len(pages) <= 1, f"{cb.cid} ({state}): people were paged by {pages}"
        paging = {r.kind for r in mine if r.page}
        assert len(paging) <= 1, f"{cb.cid} ({state}): messages {sorted(paging)} all said page: true"
        fallbacks = [r.text for r in mine if r.kind == "fallback"]
        if cb.stopped_open:
            assert not any(STILL_INVESTIGATING in t for t in fallbacks), f"{cb.cid}: stopped, yet {fallbacks}"
        if cb.budget_line is not None:
            assert all(f"budget ran out ({cb.budget_line})" in t for t in fallbacks), fallbacks
        if state == "resolved":
            assert not fallback, f"{cb.cid}: a fallback after resolved"
        if resolved_page:
            assert state == "resolved", f"{cb.cid} ({state}): a 'resolved before the page' line"

    def check_pagerduty(self) -> None:
        """Nothing reaches PagerDuty after the ``resolve`` of its dedup_key (it would open an
        incident nothing closes), and never faster than its 120 events a minute (the stand-in
        answers 429 past that: none may be seen)."""
        assert 0 == self.pagerduty.throttled, "PagerDuty was sent more than 120 events in a minute"
        resolved: set[str] = set()
        for action, key in self.pagerduty.actions():
            if action == "resolve":
                resolved.add(key)
            else:
                assert key not in resolved, f"PagerDuty got a {action} of {key} after its resolve"

    # -- the end -------------------------------------------------------------------------------

    def teardown(self) -> None:
        try:
            if self.cbs:
                self.run(self.finish())
            assert self.world is not None
            COUNTS.add(self.world.kind, self.steps, self.outcomes)
        finally:
            self.run(self.close())

    async def finish(self) -> None:
        """Let time run until nothing is left to do, then check that every fire was heard once."""
        for _ in range(400):
            if await self.settled():
                break
            await self.advance(0.5)
        else:
            pending = {cid: (await self.state(cid)).state for cid in self.cbs}
            raise AssertionError(f"contracts still not settled after 200 s: {pending}")
        await self.check()
        outcomes: dict[str, int] = {}
        for cid, cb in self.cbs.items():
            state = (await self.state(cid)).state
            outcomes[state] = outcomes.get(state, 0) + 1
            mine = [r for r in self.sink.received if r.accepted and r.callback_id == cid]
            self.check_heard_once(cb, state, mine)
            self.check_follow_ups(cb, mine)
        self.outcomes = outcomes

    def check_heard_once(self, cb: Callback, state: str, mine: list[Received]) -> None:
        """Every fire reached people exactly once: by its page (none when expired, or resolved with
        notifyResolved off)."""
        heard = {r.kind.split(".")[0] for r in mine} & {"notify", "fallback"}
        if state == "fulfilled":
            assert {"notify"} == heard, f"{cb.cid} ({state}): people heard {heard or 'nothing'}"
        elif state == "fallback_sent":
            assert "fallback" in heard, f"{cb.cid} ({state}): people heard {heard or 'nothing'}"
        elif state == "expired":
            assert "fallback" not in heard, f"{cb.cid} ({state}): people heard {heard}"
        elif state == "resolved":
            assert cb.resolution is not None
            lines = {r.path for r in mine if r.kind == "resolved" and r.text.endswith(BEFORE_THE_AGENT)}
            wanted = {f"/{t}" for t in TARGETS} if cb.resolution[2] else set()
            assert wanted == lines, f"{cb.cid}: resolved before its page, the line reached {lines}"

    def check_follow_ups(self, cb: Callback, mine: list[Received]) -> None:
        """Every follow-up arrived exactly once (one key) at each target whose answers accept it
        within ``delivery.maxAttempts`` (the others keep it in a delivery_failure item)."""
        for text, targets in cb.follow_ups:
            for target in targets:
                keys = {r.key for r in mine if r.text == text and r.path == f"/{target}"}
                assert len(keys) <= 1, f"{cb.cid}: follow-up {text!r} reached {target} under {keys}"
                if self.accepts(target, text):
                    assert keys, f"{cb.cid}: follow-up {text!r} never reached {target}"

    def accepts(self, target: str, text: str) -> bool:
        """Whether ``target``'s plan for ``text`` accepts it within three attempts."""
        plan = self.plans.get((f"/{target}", text), ())
        return "reject" not in plan and plan[:3] != ("fail", "fail", "fail")

    async def settled(self) -> bool:
        for cid in self.cbs:
            if (await self.state(cid)).state not in FINAL:
                return False
            for delivery in await self.service.store.list_deliveries(cid):
                if delivery.state == "pending":
                    return False
        return True

    async def close(self) -> None:
        self.sink.release()
        await self.close_others()
        await self.service.http.close()
        await self.service.store.close()


# -- how the model reaches into the service (the only part that knows its internals) ------------


class AgentSink:
    """Where the service hands callbacks to sessions: here the model plays the agent itself, so
    new callbacks and decided approvals are only noted (the rules act for the agent)."""

    async def submit(self, envelope: Envelope, contract: Contract) -> None:
        return None

    async def requeue(self, contract: Contract) -> None:
        return None


async def pause(service: Service, contract: Contract, paused: Paused) -> None:
    """What the session does when a tool call waits for an approval: remember it is paused."""
    await service.store.put_checkpoint(
        progress_key(contract.callback_id),
        {"status": "paused", "approvalId": paused.item_id, "toolCallId": paused.call.id},
    )


def forget_store(redis_url: str | None, directory: Path) -> None:
    """Empty a model's store (its Redis database, or its SQLite file in ``directory``)."""
    if redis_url is not None:
        with redis.Redis.from_url(redis_url) as client:
            client.flushdb()  # ok-shared: this server was started by the tests, for the tests
    for leftover in directory.glob("state.db*"):
        leftover.unlink()


async def model_service(config: LoadedConfig, clock: FakeClock) -> Service:
    """A Service over a model's store, started only as far as a model needs: no loops; the agent's
    part is the model's own (``AgentSink``)."""
    service = Service(config, clock=clock, sink=AgentSink())
    await service.store.open()
    await service.http.start()
    return service


async def outbox_pass(service: Service) -> None:
    """One pass of the outbox worker: claim what is due and attempt it."""
    await service.dispatcher.drain_due()
