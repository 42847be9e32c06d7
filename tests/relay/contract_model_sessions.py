"""The session side of the contract's model (``contract_model.ContractMachine`` mixes it in):
the time limit, budget exhaustion, two replicas handing over notifies at once, and kill -9.

Each rule calls the real code a hook session calls at that point (``SessionRunner._stop`` when
``limits.limit_for`` says the time is up, ``SessionRunner._out_of_budget`` when a budget check
raised ``BudgetExhausted``; a second ``Service`` over the same store for the replica) — what the
model cannot run is the model backend, so it plays the agent and decides when the checks fire.

Fault → invariants it exercises:

- time limit (``hookSessionMaxMs``, before or after the deadline, since approvals move the
  deadline): the stop sends nothing itself; ``session stopped: <reason>`` is in the transcript
  exactly once; a fallback settled after it never says the agent is still investigating; the
  stopped session notifies no more; the contract still ends in one final state with one page.
- budget exhausted: without a page yet (``pending``) the fallback is due at once (at most 1 s
  later) and says which budget ran out; with a page already, or an approval open, or the fire
  resolved, nothing at all is enqueued; nothing more from the session after.
- two notifies at once on two replicas: one page (``page: true`` on one message only), the other
  a follow-up delivered once; never two pages (the store decides the page atomically).
- kill -9: an outbox pass and a relay pass are cut at a random point (their claims stay leased,
  their sends may have reached the target or not) and the process is abandoned without closing;
  a fresh ``Service`` over the same store recovers: no message lost or sent twice, one page, every
  follow-up once, nothing to PagerDuty after its ``resolve``.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, rule

from sentinel_hooks.callbacks.backends.base import ToolCall
from sentinel_hooks.callbacks.sessions.budgets import BudgetExhausted
from sentinel_hooks.callbacks.sessions.limits import limit_for
from sentinel_hooks.callbacks.sessions.progress import progress
from sentinel_hooks.relay.relay import CLAIM_LEASE_MS

if TYPE_CHECKING:
    from sentinel_hooks.service import Service
    from tests.relay.contract_model import Callback

ANSWERS_OK = st.sampled_from([("ok",), ("fail", "ok"), ("reject",)])
BUDGETS = st.sampled_from([("fire", "perFire.tokens"), ("watcher_day", "perWatcherDay.costUsd")])
STOPPED = "session stopped: "


class SessionFaults:
    """Rules for the session side; the machine provides ``run``, ``cbs``, ``service``, ``clock``,
    ``build``, ``toolbox``, ``record_notify``, ``new_text``, ``sink``, ``plans`` and ``steps``."""

    callbacks = Bundle("callbacks")
    replica: Service | None = None
    abandoned: list[Service]

    async def session_begins(self, cb: Callback) -> None:
        """What a hook session writes first: its first transcript entry and ``running``."""
        runner = self.service.sessions.runner
        entry = {"kind": "status", "status": "running"}
        await runner.append_all(cb.contract, [entry], progress(cb.contract, "running"))

    @rule(cid=callbacks)
    def session_time_limit(self, cid: str) -> None:
        """The session asks, before its next model call, whether its time is up
        (``hookSessionMaxMs``): if so it is stopped, before or after the contract's deadline."""
        self.steps += 1
        cb: Callback = self.cbs[cid]
        if cb.stopped is None and cb.approval is None:
            self.run(self.time_limit(cb))

    async def time_limit(self, cb: Callback) -> None:
        service = self.service
        runner = service.sessions.runner
        records = await runner._own_records(cb.contract)
        now = self.clock.now()
        limit = limit_for(None, service.config.service, records, now)
        if limit.left_s(now) > 0:
            return
        await self.stop_session(cb, "time", runner._stop(cb.contract, limit.reason, 1))
        stops = [r for r in await runner._own_records(cb.contract) if r.entry.get("status") == "stopped"]
        assert 1 == len(stops), f"{cb.cid}: {len(stops)} 'session stopped' entries"
        assert str(stops[0].entry["text"]).startswith(STOPPED + "it investigated for 4s"), stops[0].entry

    @rule(cid=callbacks, budget=BUDGETS)
    def budget_exhausted(self, cid: str, budget: tuple[str, str]) -> None:
        """A budget check before a model call finds the budget spent (SPEC §20): the session
        stops; without a page yet the fallback goes at once and names the budget."""
        self.steps += 1
        cb: Callback = self.cbs[cid]
        if cb.stopped is None and cb.approval is None:
            self.run(self.out_of_budget(cb, budget))

    async def out_of_budget(self, cb: Callback, budget: tuple[str, str]) -> None:
        scope, which = budget
        runner = self.service.sessions.runner
        exhausted = BudgetExhausted(scope, which)
        before = (await self.service.store.get_contract(cb.cid)).state
        await self.stop_session(cb, "budget", runner._out_of_budget(cb.contract, exhausted), which)
        if before == "pending":
            cb.deadline = self.clock.now()  # due at once now
            cb.budget_line = which

    async def stop_session(self, cb: Callback, why: str, stopping: Any, which: str = "") -> None:
        """Run a stop; it sends nothing itself beyond a due fallback (budget, before a page)."""
        store = self.service.store
        before = {d.key for d in await store.list_deliveries(cb.cid)}
        await stopping
        after = {d.key for d in await store.list_deliveries(cb.cid)}
        assert before == after, f"{cb.cid}: stopping the session ({why}) enqueued {after - before}"
        cb.stopped = why
        current = await store.get_contract(cb.cid)
        cb.stopped_open = current is not None and current.state in ("pending", "notifying")

    @rule(cid=callbacks, a=ANSWERS_OK, b=ANSWERS_OK)
    def notifies_on_two_replicas(self, cid: str, a: tuple[str, ...], b: tuple[str, ...]) -> None:
        """The session's next two notifies handed over at the same moment on two replicas (one
        resumed there): the store decides which one is the page."""
        self.steps += 1
        cb: Callback = self.cbs[cid]
        if cb.stopped is None and cb.approval is None:
            self.run(self.two_notifies(cb, a, b))

    async def two_notifies(self, cb: Callback, a: tuple[str, ...], b: tuple[str, ...]) -> None:
        if self.replica is None:
            self.replica = await self.build()
        from tests.relay.rig import toolbox_for

        contract = await self.service.store.get_contract(cb.cid)
        assert contract is not None
        before = contract.state
        boxes = [
            toolbox_for(self.service, contract, cb.envelope, cb.notified),
            toolbox_for(self.replica, contract, cb.envelope, cb.notified + 1),
        ]
        calls = []
        for answers in (a, b):
            text = self.new_text(cb)
            for path in ("/a", "/b"):
                self.sink.plan(path, text, answers)
                self.plans[(path, text)] = answers
            calls.append(
                (
                    text,
                    ToolCall(
                        f"n{text}",
                        "sentinel_act",
                        {"action": "notify", "message": text, "targets": ["a", "b"]},
                    ),
                )
            )
        runs = (box.execute(call, history=[]) for box, (_, call) in zip(boxes, calls, strict=True))
        results = await asyncio.gather(*runs)
        for (text, _), result in zip(calls, results, strict=True):
            self.record_notify(cb, text, before, result, ["a", "b"])
        cb.notified = max(cb.notified, *(r.get("notify", 0) for r in results))
        cb.box.notified = cb.notified  # the session's own count goes on from both
        # Both may have been page candidates in turn (the first refused for good everywhere puts
        # the contract back to pending), but at most one got through as the page.
        pages = [r for r in results if r.get("deliveredAs") != "followup" and r.get("delivered")]
        assert len(pages) <= 1, f"{cb.cid}: two notifies at once both paged people: {results}"

    @rule(yields=st.integers(0, 8))
    def kill_9(self, yields: int) -> None:
        """kill -9 while an outbox pass and a relay pass run: both are cut after ``yields`` turns
        of the event loop, the process is abandoned unclosed, and a fresh one starts."""
        self.steps += 1
        self.run(self.killed(yields))

    async def killed(self, yields: int) -> None:
        old = self.service
        loop = asyncio.get_running_loop()
        work = [loop.create_task(old.dispatcher.drain_due()), loop.create_task(old.relay.settle_due())]
        for _ in range(yields):
            await asyncio.sleep(0)  # a fault point: how far the cut work got, not a wait
        for task in work:
            task.cancel()
        await old.dispatcher.stop(timeout_s=0)  # the sends under way die with the process too
        for task in work:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.abandoned.append(old)
        now = self.clock.now()
        for cb in self.cbs.values():  # its claims stay leased: downtime, then recovered (SPEC §6.1)
            cb.deadline = max(cb.deadline, now + timedelta(milliseconds=CLAIM_LEASE_MS))
        self.service = await self.build()
        for cb in self.cbs.values():
            current = await self.service.store.get_contract(cb.cid)
            assert current is not None
            cb.box = self.toolbox(current, cb.envelope, cb.notified)

    async def close_others(self) -> None:
        """Close the replica and the abandoned processes (at the end of an example)."""
        others = [*self.abandoned, *([self.replica] if self.replica is not None else [])]
        self.abandoned, self.replica = [], None
        for service in others:
            with contextlib.suppress(Exception):
                await service.http.close()
            with contextlib.suppress(Exception):
                await service.store.close()

    service: Any
