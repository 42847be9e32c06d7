"""Hook sessions (SPEC.md §5): one isolated agent conversation per callback, grouped by session key.

A session queue (``callbacks/queues/base.py``) runs callbacks of one session key one at a time in
arrival order, different keys in parallel up to ``hookConcurrency``. Every model turn and tool
result is appended to the session's transcript in the store as it happens (the checkpoint), so
a session cut off by a crash resumes where it stopped, without repeating a tool call whose
result was recorded (a notify's result goes with the session's next write: a notify tried again
adds nothing, ``actions``); a model call's usage is counted in the step that records its
reply. The tool calls of a turn are run and recorded by ``actions.ToolCalls``; the progress
mark is ``progress``'s.
A session that fails leaves its contract pending: the relay's fallback still reaches people.
A session may go on after its contract's deadline, up to its time limit (``limits``).
Its model calls are counted and bounded by ``budgets.Meter`` (SPEC §20); the module is past 500
lines by the time limit, the budget stop and the meter's wiring, which belong to the conversation
they end.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from sentinel_hooks.callbacks.backends.base import (
    ModelBackend,
    ModelError,
    ModelReply,
    ToolSpec,
    TransientModelError,
)
from sentinel_hooks.callbacks.backends.recovery import recover_tool_calls
from sentinel_hooks.callbacks.backends.scripted import ScriptedBackend, ScriptedPlan, message_for
from sentinel_hooks.callbacks.intake.groups import group_starts_at
from sentinel_hooks.callbacks.intake.intake import message_key
from sentinel_hooks.callbacks.policy.judge import Judges
from sentinel_hooks.callbacks.sessions import compaction, memory
from sentinel_hooks.callbacks.sessions.actions import ToolCalls, open_calls
from sentinel_hooks.callbacks.sessions.budgets import METER, BudgetExhausted, Call, Measured, Meter
from sentinel_hooks.callbacks.sessions.limits import Limit, limit_for
from sentinel_hooks.callbacks.sessions.priorities import GroupPriorities
from sentinel_hooks.callbacks.sessions.progress import FINAL, REJOINED, progress, progress_key
from sentinel_hooks.callbacks.sessions.prompt import (
    group_fires_seen,
    group_section,
    joined_section,
    seen_fires,
    system_message,
    user_message,
)
from sentinel_hooks.callbacks.sessions.tools import (
    FIRE_RESOLVED,
    CommandGate,
    McpCaller,
    McpTool,
    ToolBox,
    notifies_in,
)
from sentinel_hooks.clock import Clock
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.config.watcher import AnyWatcher
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.core.grouping import bounded_members
from sentinel_hooks.core.retry import Backoff, call_with_retries
from sentinel_hooks.core.usage import Usage
from sentinel_hooks.events import Events
from sentinel_hooks.inbox.items import Inbox
from sentinel_hooks.relay.relay import Relay
from sentinel_hooks.skills.injection import SkillLookup, session_skill
from sentinel_hooks.store.base import (
    CheckpointStore,
    ContractStore,
    SessionStore,
    TranscriptTail,
    UsageCount,
    UsageStore,
    WatcherStore,
)
from sentinel_hooks.store.records import Contract, GroupInfo, TranscriptEntry

log = logging.getLogger(__name__)

MODEL_BACKOFF = Backoff(base_s=0.5, cap_s=8, jitter="full", max_attempts=3)  # SPEC §5.2, per model call
_RNG = random.Random()  # the model backoff's jitter


class SessionMcp(McpCaller, Protocol):
    """The MCP part of a session: the tools it offers, and their calls (``McpGate``, or a dry run's)."""

    async def offer(self, patterns: Sequence[str]) -> dict[str, McpTool]: ...


class SessionRoles(SessionStore, CheckpointStore, ContractStore, WatcherStore, UsageStore, Protocol):
    """The store roles a hook session calls: its transcript and checkpoints, the callbacks it
    reads, what its tools read (``ToolBox``), and the usage counters of its budgets."""


@dataclass(frozen=True)
class Begun:
    """What a session starts from (``SessionRunner._begin``): its envelope, its progress status
    before this run (None: a new session), the fire's message and the memory read with them."""

    envelope: Envelope
    status: str | None
    rendered: dict[str, Any]
    memory: dict[str, Any] | None
    transcript: list[TranscriptEntry] | None
    group: GroupInfo | None = None  # the group's members as the session starts (SPEC §19)


@dataclass(frozen=True)
class SessionDeps:
    store: SessionRoles
    clock: Clock
    service: ServiceConfig
    relay: Relay
    inbox: Inbox
    gate: CommandGate
    backends: Mapping[str, ModelBackend]
    watcher: Callable[[str], AnyWatcher | None]
    skill: SkillLookup  # the skill loaded now: a reload (SIGHUP) may change it
    redactor: Redactor
    events: Events | None = None
    judges: Judges | None = None
    mcp: SessionMcp | None = None
    priorities: GroupPriorities = field(default_factory=GroupPriorities)  # shared by every session's tools


def choose_model(watcher: AnyWatcher | None, service: ServiceConfig) -> tuple[str | None, str]:
    """fire.model → defaultHookModel → the first entry of models → scripted (SPEC §5.1)."""
    if watcher is not None and watcher.fire.model:
        return watcher.fire.model, "fire.model"
    if service.default_hook_model:
        return service.default_hook_model, "defaultHookModel"
    if service.models:
        return next(iter(service.models)), "first entry of models"
    return None, "default (scripted)"


class SessionRunner:
    """Runs (or resumes) the session of one callback."""

    def __init__(self, deps: SessionDeps) -> None:
        self._deps = deps
        self._scripted = ScriptedBackend("scripted")
        self._calls = ToolCalls(
            self, circuit_breaker=deps.service.action_policy.circuit_breaker, events=deps.events
        )
        # per callback running here: entries and checkpoints held for its next append
        self._held: dict[str, tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]] = {}

    async def append(
        self, contract: Contract, entry: dict[str, Any], *, hold: bool = False
    ) -> dict[str, Any]:
        """Store ``entry`` in the transcript with secrets masked, and return what was stored.

        A message goes to the model as returned here, never as it was before masking: a tool
        result (a command's output, an observation) may hold a secret of the service.
        """
        return (await self.append_all(contract, [entry], hold=hold))[0]

    async def append_all(
        self,
        contract: Contract,
        entries: list[dict[str, Any]],
        checkpoints: dict[str, dict[str, Any]] | None = None,
        *,
        hold: bool = False,
        usage: UsageCount | None = None,
    ) -> list[dict[str, Any]]:
        """``append`` for several entries, in order, in one store step that also puts
        ``checkpoints`` (``progress``: the session's progress with the entries it follows) and
        counts ``usage`` (the model call whose reply the entries record: ``Meter.measure``).

        With ``hold`` they are written with the callback's next append instead, in its step:
        for what a scripted reply follows (computed here, at once, with no effect outside), so
        a scripted session writes its request with the reply and a tool's result with the
        reply to it. A crash in between loses only steps the session takes again on resume.
        """
        redactor = self._deps.redactor
        stored = [redactor.data({"callbackId": contract.callback_id, **entry}) for entry in entries]
        held = self._held.pop(contract.callback_id, None)
        if held is not None:
            earlier, saved = held
            entries, checkpoints = [*earlier, *stored], {**saved, **(checkpoints or {})}
        else:
            entries = stored
        if hold and usage is None:  # a scripted reply's: no model call to count
            self._held[contract.callback_id] = (entries, checkpoints or {})
            return stored
        await self._deps.store.append_transcript(
            contract.session_key, entries, at=self._deps.clock.now(), checkpoints=checkpoints, usage=usage
        )
        return stored

    async def mark(self, contract: Contract, status: str, **extra: Any) -> None:
        """Put the session's progress mark (with the entries held for it, if any)."""
        if contract.callback_id in self._held:  # written with what it follows
            await self.append_all(contract, [], progress(contract, status, **extra))
            return
        await self._deps.store.put_checkpoint(progress_key(contract.callback_id), {"status": status, **extra})

    async def run(self, contract: Contract, envelope: Envelope | None = None) -> str:
        """Run the session to its end (or to a pause); the final status.

        ``envelope`` is the callback's envelope when the caller holds it (the queue it was
        submitted to, in the process that accepted it): it is then not read back from the store.
        """
        begun = await self._begin(contract, envelope)
        if isinstance(begun, str):
            return begun
        try:
            return await self._converse(contract, begun)
        finally:
            self._held.pop(contract.callback_id, None)  # a session that raised: as after a crash

    async def _begin(self, contract: Contract, envelope: Envelope | None) -> Begun | str:
        """What the session starts from, or its final status when there is nothing to run.

        Its contract, checkpoints and (unless held) envelope are read in one step
        (``SessionStore.read_callback``). A new session (no progress checkpoint yet) is marked
        ``running`` in the step that writes its first transcript entries, so a session without
        that mark has no entries of its own and its session's transcript need not be read (it
        grows with every callback of the key).
        """
        callback_id = contract.callback_id
        memory_key = memory.memory_key(contract.session_key)
        if envelope is not None:
            await self._wait_for_group(contract, envelope)
        view = await self._deps.store.read_callback(
            callback_id,
            [progress_key(callback_id), message_key(callback_id), memory_key],
            tail=self._recall_tail(contract, memory_key),
            envelope=envelope is None,
        )
        checkpoints = view.checkpoints
        status = (checkpoints.get(progress_key(callback_id)) or {}).get("status")
        if status in FINAL:
            return str(status)
        if status is None and (view.contract is None or view.contract.state != "pending"):
            await self.mark(contract, "skipped")
            return "skipped"
        resumed_early = envelope is None and view.envelope is not None and status is None
        if resumed_early and view.envelope and await self._wait_for_group(contract, view.envelope):
            return await self._begin(contract, view.envelope)  # waited out the group's waitMs: read again
        envelope = envelope or view.envelope
        if envelope is None:
            await self.mark(contract, "failed", error="envelope missing")
            return "failed"
        rendered = checkpoints.get(message_key(callback_id)) or {}
        if rendered.get("error"):
            await self._fail(contract, str(rendered["error"]))
            return "failed"
        group = None if view.contract is None else view.contract.group
        return Begun(envelope, status, rendered, checkpoints.get(memory_key), view.transcript, group)

    async def wait_to_start(self, contract: Contract, envelope: Envelope | None = None) -> None:
        """Return when the session may start: a group's once its ``waitMs`` ended (its envelope,
        unless handed, read from the store), any other at once. Queues await it before taking a
        ``hookConcurrency`` slot, so a group waiting holds none (SPEC §19)."""
        if contract.group is None:
            return
        if envelope is None:
            found = await self._deps.store.get_envelopes([contract.callback_id])
            envelope = found.get(contract.callback_id)
        if envelope is not None:
            await self._wait_for_group(contract, envelope)

    async def _wait_for_group(self, contract: Contract, envelope: Envelope) -> bool:
        """A group's session starts when its ``waitMs`` ends (SPEC §19): one queued early (resumed
        after a restart during the wait) waits out the rest. True when it waited."""
        starts_at = group_starts_at(contract, envelope.delivery.timeout_ms)
        if starts_at is None:
            return False
        wait_s = (starts_at - self._deps.clock.now()).total_seconds()
        if wait_s <= 0:
            return False
        await self._deps.clock.sleep(wait_s)
        return True

    async def _group_section(self, group: GroupInfo | None) -> str | None:
        """The group's members for the opening message, bounded (``core.grouping.bounded_members``)."""
        if group is None:
            return None
        head, left_out, tail = bounded_members(group.members)
        found = await self._deps.store.get_envelopes([*head, *tail])
        return group_section(
            group.fires,
            [found[m] for m in head if m in found],
            left_out,
            [found[m] for m in tail if m in found],
        )

    async def _converse(self, contract: Contract, begun: Begun) -> str:
        """The conversation from where the session stands (its start, or its checkpoint)."""
        envelope = begun.envelope
        watcher = (
            self._deps.watcher(contract.watcher_id) if envelope.source.route != "/hooks/sentinel" else None
        )
        backend = self._backend(watcher, envelope, begun.rendered)
        box = await self._toolbox(contract, envelope, watcher)
        if begun.status is not None and begun.status != "running":  # resumed after an approval
            await self.mark(contract, "running")
        records = [] if begun.status is None else await self._own_records(contract)
        own = [(e.seq, e.entry) for e in records]
        rejoined = begun.status == REJOINED  # run again for joins: a fresh time limit (SPEC §19)
        limit = limit_for(watcher, self._deps.service, [] if rejoined else records, self._deps.clock.now())
        messages = [message for _, message in compaction.apply(own)]
        # counted on the uncompacted results: a summary or a cut may hide an earlier notify
        box.notified = notifies_in([e["message"] for _, e in own if e.get("kind") == "message"])
        if not messages:
            messages = await self._opening(contract, backend, box, watcher, begun)
        meter = Meter(
            store=self._deps.store,
            clock=self._deps.clock,
            service=self._deps.service,
            inbox=self._deps.inbox,
            events=self._deps.events,
            callback_id=contract.callback_id,
            watcher_id=contract.watcher_id,
            session_key=contract.session_key,
            watcher_budget=None if watcher is None else watcher.fire.budget,
            fire_used=Usage() if begun.status is None else None,  # a new session has made no call
        )
        metering = METER.set(meter)  # the judge rules its actions meet count against it too
        try:
            seen = group_fires_seen([e.entry for e in records], begun.group)
            current = await self._deps.store.get_contract(contract.callback_id) if rejoined else None
            if current is not None and current.group is not None and current.group.fires > seen:
                seen = await self._hand_joins(contract, current.group, seen, messages)
            grouped = begun.group is not None or (current is not None and current.group is not None)
            return await self._loop(contract, backend, box, messages, limit, meter, seen, grouped=grouped)
        except ModelError as exc:
            await self._fail(contract, f"model {backend.name!r} failed: {exc}")
            return "failed"
        except BudgetExhausted as exc:
            return await self._out_of_budget(contract, exc)
        finally:
            METER.reset(metering)

    async def _opening(
        self,
        contract: Contract,
        backend: ModelBackend,
        box: ToolBox,
        watcher: AnyWatcher | None,
        begun: Begun,
    ) -> list[dict[str, Any]]:
        """A new session's first messages (system, then user: skill, goal, memory, envelope),
        stored after the model chosen, with the ``running`` mark and what memory learned."""
        deps = self._deps
        envelope = begun.envelope
        recalled, learned = await self._recall(contract, backend, begun.memory, begun.transcript)
        name, via = choose_model(watcher, deps.service)
        skill = session_skill(envelope.watcher.skill_id, deps.skill)
        first = [
            system_message(envelope.mode.autonomy),
            user_message(
                envelope,
                skill=skill,
                tools=box.offered,
                memory=recalled,
                group=await self._group_section(begun.group),
            ),
        ]
        stored = await self.append_all(
            contract,
            [
                {"kind": "model", "model": backend.model, "entry": name, "via": via},
                {"kind": "message", "message": first[0]},
                {"kind": "message", "message": first[1], **seen_fires(begun.group)},
            ],
            {**progress(contract, "running"), **learned},
            hold=isinstance(backend, ScriptedBackend),
        )
        return [entry["message"] for entry in stored[1:]]

    async def _toolbox(self, contract: Contract, envelope: Envelope, watcher: AnyWatcher | None) -> ToolBox:
        deps = self._deps
        return ToolBox(
            envelope=envelope,
            contract=contract,
            store=deps.store,
            relay=deps.relay,
            inbox=deps.inbox,
            clock=deps.clock,
            service=deps.service,
            commands=deps.gate,
            skill_id=envelope.watcher.skill_id,
            events=deps.events,
            judges=deps.judges,
            mcp=deps.mcp,
            mcp_tools=await self._mcp_tools(watcher, envelope),
            priorities=deps.priorities,
        )

    async def _out_of_budget(self, contract: Contract, exhausted: BudgetExhausted) -> str:
        """Stop the session (SPEC §20): the call was not made; without a page yet, the fallback
        goes now and says which budget ran out."""
        text = f"session stopped: budget exhausted ({exhausted.which})"
        log.warning(
            "session for %s: %s", contract.callback_id, text, extra={"callbackId": contract.callback_id}
        )
        entry = {
            "kind": "status",
            "status": "stopped",
            "reason": "budget",
            "which": exhausted.which,
            "text": text,
        }
        await self.append_all(
            contract, [entry], progress(contract, "done", stopped="budget", which=exhausted.which)
        )
        await self._deps.relay.fallback_now(contract.callback_id, exhausted.which)
        return "done"

    async def _mcp_tools(self, watcher: AnyWatcher | None, envelope: Envelope) -> dict[str, McpTool]:
        """The MCP tools of ``fire.tools`` (SPEC §17): none without a watcher, and none unless
        the callback's autonomy is ``act`` (notify_only and escalate_only offer no MCP tools)."""
        mcp = self._deps.mcp
        if mcp is None or watcher is None or not watcher.fire.tools or envelope.mode.autonomy != "act":
            return {}
        return await mcp.offer(watcher.fire.tools)

    def _backend(
        self, watcher: AnyWatcher | None, envelope: Envelope, rendered: dict[str, Any]
    ) -> ModelBackend:
        name, _ = choose_model(watcher, self._deps.service)
        backend = self._deps.backends.get(name) if name else None
        if backend is None or isinstance(backend, ScriptedBackend):
            plan = ScriptedPlan(
                message=str(rendered.get("text") or message_for(envelope)),
                escalate=bool(watcher is not None and watcher.fire.escalate),
            )
            return (backend if isinstance(backend, ScriptedBackend) else self._scripted).for_callback(plan)
        return backend

    async def _entries(self, contract: Contract) -> list[tuple[int, dict[str, Any]]]:
        """This callback's messages as ``(seq, message)``, compactions applied."""
        return compaction.apply(await self._own_entries(contract))

    async def _own_entries(self, contract: Contract) -> list[tuple[int, dict[str, Any]]]:
        """This callback's transcript entries as ``(seq, entry)``."""
        return [(e.seq, e.entry) for e in await self._own_records(contract)]

    async def _own_records(self, contract: Contract) -> list[TranscriptEntry]:
        """This callback's transcript entries, with when each was written."""
        entries = await self._deps.store.get_transcript(contract.session_key)
        return [e for e in entries if e.entry.get("callbackId") == contract.callback_id]

    async def _messages(self, contract: Contract) -> list[dict[str, Any]]:
        return [message for _, message in await self._entries(contract)]

    def _recall_tail(self, contract: Contract, memory_key: str) -> TranscriptTail | None:
        """The transcript entries ``_recall`` will read, to read with the callback (one round
        trip less per fire), when the callback's model is likely not the scripted one (which
        recalls nothing): judged from its watcher before the envelope is read. A wrong guess
        costs a read, never the right answer (``_recall`` reads what it was not given)."""
        name, _ = choose_model(self._deps.watcher(contract.watcher_id), self._deps.service)
        backend = self._deps.backends.get(name) if name else None
        if backend is None or isinstance(backend, ScriptedBackend):
            return None
        return TranscriptTail(contract.session_key, memory_key, memory.PLACE)

    async def _recall(
        self,
        contract: Contract,
        backend: ModelBackend,
        saved: dict[str, Any] | None,
        tail: list[TranscriptEntry] | None,
    ) -> tuple[str | None, dict[str, dict[str, Any]]]:
        """What the session did about its earlier callbacks (memory.py), for the first user
        message, and the memory checkpoint to put with the first entries (none when unchanged).

        ``saved`` is the session's memory checkpoint and ``tail`` the transcript after the place
        it holds (None: not read), both read with the callback. Only the entries written since
        the previous callback's recall are read; the updated state is kept for the next one. No
        text for a session's first callback, and for the scripted backend, which reads no messages.
        """
        if isinstance(backend, ScriptedBackend):
            return None, {}
        store = self._deps.store
        key = memory.memory_key(contract.session_key)
        state = memory.MemoryState.from_json(saved)
        if tail is None or state.through_seq != memory.place(saved):  # a state started afresh
            tail = await store.get_transcript(contract.session_key, after_seq=state.through_seq)
        entries = tail
        state = memory.fold(state, entries, exclude=contract.callback_id)
        wanted = memory.wanted_envelopes(state)
        unsettled = memory.unsettled(state)
        envelopes, contracts = await _read_for_memory(store, wanted, unsettled)
        now = self._deps.clock.now()
        state = memory.bound(memory.learn(state, envelopes=envelopes, contracts=contracts), now)
        stored = state.to_json()
        # e.g. a session's first callback: nothing learned, nothing to write
        unchanged = stored == (saved if saved is not None else memory.EMPTY)
        return memory.render(state, now), ({} if unchanged else {key: stored})

    async def _compact(
        self,
        contract: Contract,
        backend: ModelBackend,
        messages: list[dict[str, Any]],
        tools: list[ToolSpec],
        sizes: compaction.Sizes,
        meter: Meter,
    ) -> list[dict[str, Any]]:
        """Keep the next request inside the model's budget (compaction.py).

        Over budget, older turns are summarised by the model when a summary is due, and what
        is still too large is cut; both are recorded as compaction entries in the transcript.
        """
        if isinstance(backend, ScriptedBackend):
            return messages
        budget = compaction.budget(self._deps.service.limits.max_payload_chars)
        room = compaction.room(budget, tools)
        if sizes.within(messages, room):
            return messages
        own = await self._own_entries(contract)
        entries = compaction.apply(own)
        found = compaction.split_for_compaction(entries)
        if found is not None:
            seqs, _ = found
            middle = compaction.originals(own, seqs)
            reply, measured = await self._complete(
                backend, compaction.summary_request(middle, room), [], meter, "summary"
            )
            summary = compaction.summary_message(reply.text or "(no summary)")
            entry = {"kind": "compaction", "replaces": seqs, "message": summary}
            await self._append_reply(contract, entry, None, meter, measured)
            entries = await self._entries(contract)
        for seq, message in compaction.cuts(entries, room):
            await self.append(
                contract, {"kind": "compaction", "replaces": [seq], "message": message, "cut": True}
            )
        return await self._messages(contract)

    async def _loop(
        self,
        contract: Contract,
        backend: ModelBackend,
        box: ToolBox,
        messages: list[dict[str, Any]],
        limit: Limit,
        meter: Meter,
        seen: int = 0,
        *,
        grouped: bool = True,
    ) -> str:
        """Model turns and tool calls to the session's end (or a pause). Before each model call
        but the first: a fire resolved before its page stops the session, and fires that joined
        its group since it last looked (``seen``: the group's fires it was shown) are handed to it
        as a new message (SPEC §19). The contract is read for that unless nothing can have
        changed: a contract without a group (``grouped`` False; none is added later) that a
        notify of this run found settled (``ToolBox.settled``)."""
        tools = box.specs
        sizes = compaction.Sizes()
        turns = sum(1 for m in messages if m.get("role") == "assistant")
        scripted = isinstance(backend, ScriptedBackend)  # its reply follows a result at once
        while True:
            last = messages[-1]
            if last.get("role") == "assistant" and not last.get("toolCalls"):
                break
            if last.get("role") == "assistant" or (last.get("role") == "tool" and open_calls(messages)):
                stopped = await self._calls.run(contract, box, messages, hold=scripted)
                if stopped == "paused":
                    return "paused"
                if stopped == "tripped":
                    return await self._calls.trip(contract, box, messages)
                continue
            if self._calls.tripped(messages):
                return await self._calls.trip(contract, box, messages)
            changing = grouped or not box.settled
            current = (
                await self._deps.store.get_contract(contract.callback_id) if turns and changing else None
            )
            if current is not None and current.state == "resolved":  # before its page (SPEC §6.4)
                return await self._stop(contract, FIRE_RESOLVED, turns)
            if current is not None and current.group is not None and current.group.fires > seen:
                seen = await self._hand_joins(contract, current.group, seen, messages)
            if turns >= backend.max_turns:
                status = {"kind": "status", "status": "maxTurns", "turns": turns}
                await self.append_all(contract, [status], progress(contract, "done", turns=turns))
                return "done"
            left_s = limit.left_s(self._deps.clock.now())
            if left_s <= 0:
                return await self._stop(contract, limit.reason, turns)
            try:
                async with asyncio.timeout(left_s):  # a model call past the limit is cut off
                    messages[:] = await self._compact(contract, backend, messages, tools, sizes, meter)
                    reply, measured = await self._complete(backend, messages, tools, meter, "turn")
            except TimeoutError:
                return await self._stop(contract, limit.reason, turns)
            turns += 1
            message = reply.to_message()
            # the last reply (no tool calls) and the session's end are one step
            done = progress(contract, "done", turns=turns) if not message.get("toolCalls") else None
            entry = {"kind": "message", "message": message, "model": reply.model}
            stored = await self._append_reply(contract, entry, done, meter, measured)
            messages.append(stored["message"])
            if done is not None:
                return "done"
        await self.mark(contract, "done", turns=turns)  # resumed after its last reply
        return "done"

    async def _hand_joins(
        self, contract: Contract, group: GroupInfo, seen: int, messages: list[dict[str, Any]]
    ) -> int:
        """Fires that joined the group after the session was shown ``seen`` of them reach it as a
        new message (their envelopes bounded as at the start); the group's fires it has now seen."""
        joined = group.members[seen:]
        head, left_out, tail = bounded_members(joined)
        found = await self._deps.store.get_envelopes([*head, *tail])
        text = joined_section(
            len(joined),
            group.fires,
            [found[m] for m in head if m in found],
            left_out,
            [found[m] for m in tail if m in found],
        )
        entry = {"kind": "message", "message": {"role": "user", "content": text}, **seen_fires(group)}
        [stored] = await self.append_all(contract, [entry])
        messages.append(stored["message"])
        return group.fires

    async def _stop(self, contract: Contract, reason: str, turns: int) -> str:
        """End the session before its next model call: ``session stopped: <reason>`` is recorded
        in its transcript, with its end (SPEC §6.4)."""
        log.info(
            "session for %s stopped: %s",
            contract.callback_id,
            reason,
            extra={"callbackId": contract.callback_id},
        )
        entry = {
            "kind": "status",
            "status": "stopped",
            "reason": reason,
            "text": f"session stopped: {reason}",
        }
        await self.append_all(contract, [entry], progress(contract, "done", turns=turns, stopped=reason))
        return "done"

    async def _complete(
        self,
        backend: ModelBackend,
        messages: list[dict[str, Any]],
        tools: list[ToolSpec],
        meter: Meter,
        call: Call,
    ) -> tuple[ModelReply, Measured | None]:
        """One model call with SPEC §5.2 retries (``MODEL_BACKOFF``: 3 attempts, jittered 0.5 to 8 s),
        and its usage (None for the scripted backend, which calls no model), to be counted with
        the reply's entry (``_append_reply``). The budgets are checked first (``BudgetExhausted``:
        the call is not made)."""
        metered = not isinstance(backend, ScriptedBackend)
        if metered:
            await meter.check()
        started = time.perf_counter()
        reply = await call_with_retries(
            lambda: backend.complete(messages, tools), MODEL_BACKOFF, retry_if=TransientModelError, rng=_RNG
        )
        measured = meter.measure(backend.name, call, messages, reply, started) if metered else None
        return _recovered(reply, [t.name for t in tools]), measured

    async def _append_reply(
        self,
        contract: Contract,
        entry: dict[str, Any],
        checkpoints: dict[str, dict[str, Any]] | None,
        meter: Meter,
        measured: Measured | None,
    ) -> dict[str, Any]:
        """Store a model call's reply ``entry`` with its usage (``entry["usage"]``), which the
        same store step adds to the budgets' counters; as stored. A crash before this step
        leaves no trace of the call: the session makes it again on resume, counted then."""
        if measured is None:
            [stored] = await self.append_all(contract, [entry], checkpoints)
            return stored
        entry = {**entry, "usage": measured.recorded}
        [stored] = await self.append_all(contract, [entry], checkpoints, usage=measured.count)
        meter.counted(measured)
        return stored

    async def _fail(self, contract: Contract, error: str) -> None:
        error = self._deps.redactor.text(error)
        log.warning(
            "session for %s failed: %s",
            contract.callback_id,
            error,
            extra={"callbackId": contract.callback_id},
        )
        entry = {"kind": "status", "status": "failed", "error": error}
        await self.append_all(contract, [entry], progress(contract, "failed", error=error))


async def _read_for_memory(
    store: SessionRoles, wanted: list[str], unsettled: list[str]
) -> tuple[dict[str, Envelope], dict[str, str]]:
    """The envelopes and contract states memory asks for (``_recall``). Several reads are
    asked together (the store's thread runs them back to back; Redis: in parallel); a lone
    read, or none (a session's first callback), is awaited in the caller's task: no gather
    and no task for it."""
    envelopes_read = store.get_envelopes(wanted) if wanted else None
    contract_reads = [store.get_contract(cid) for cid in unsettled]
    if envelopes_read is not None and contract_reads:
        read = await asyncio.gather(envelopes_read, *contract_reads)
        envelopes, found = cast(dict[str, Envelope], read[0]), cast(list[Contract | None], read[1:])
    elif envelopes_read is not None:
        envelopes, found = await envelopes_read, []
    elif len(contract_reads) == 1:
        envelopes, found = {}, [await contract_reads[0]]
    else:
        envelopes, found = {}, list(await asyncio.gather(*contract_reads))
    return envelopes, {c.callback_id: c.state for c in found if c is not None}


def _recovered(reply: ModelReply, names: list[str]) -> ModelReply:
    """Small-model robustness: a tool call written as JSON text becomes a real tool call."""
    if reply.tool_calls or not reply.text:
        return reply
    return recover_tool_calls(reply, names)
