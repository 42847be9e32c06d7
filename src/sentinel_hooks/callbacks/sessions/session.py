"""Hook sessions (SPEC.md §5): one isolated agent conversation per callback, grouped by session key.

A session queue (``callbacks/queues/base.py``) runs callbacks of one session key one at a time in
arrival order, different keys in parallel up to ``hookConcurrency``. Every model turn and tool
result is appended to the session's transcript in the store as it happens (the checkpoint), so
a session cut off by a crash resumes where it stopped, without repeating a tool call whose
result was recorded.
A session that fails leaves its contract pending: the relay's fallback still reaches people.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from sentinel_hooks.callbacks.backends.base import (
    ModelBackend,
    ModelError,
    ModelReply,
    ToolCall,
    ToolSpec,
    TransientModelError,
)
from sentinel_hooks.callbacks.backends.recovery import recover_tool_calls
from sentinel_hooks.callbacks.backends.scripted import ScriptedBackend, ScriptedPlan, message_for
from sentinel_hooks.callbacks.intake.intake import message_key
from sentinel_hooks.callbacks.policy.judge import Judges
from sentinel_hooks.callbacks.policy.rules import mcp_summary
from sentinel_hooks.callbacks.sessions import compaction, memory
from sentinel_hooks.callbacks.sessions.budgets import METER, BudgetExhausted, Call, Meter
from sentinel_hooks.callbacks.sessions.prompt import system_message, user_message
from sentinel_hooks.callbacks.sessions.tools import CommandGate, McpTool, Paused, ToolBox, notifies_in
from sentinel_hooks.clock import Clock
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.config.watcher import AnyWatcher
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.core.retry import Backoff, retry_after_of
from sentinel_hooks.events import Events
from sentinel_hooks.inbox.items import Inbox
from sentinel_hooks.relay.relay import Relay
from sentinel_hooks.skills.injection import SkillLookup, session_skill
from sentinel_hooks.store.base import (
    CheckpointStore,
    ContractStore,
    SessionStore,
    TranscriptTail,
    UsageStore,
    WatcherStore,
)
from sentinel_hooks.store.records import Contract, ContractState, TranscriptEntry

if TYPE_CHECKING:
    from sentinel_hooks.callbacks.mcp.calls import McpGate

log = logging.getLogger(__name__)

FINAL = frozenset({"done", "failed", "paused", "skipped"})
BREAKER_REASON = "the agent kept proposing denied actions"
MODEL_SEES = ("decision", "ruleId", "reason")  # of a policy decision, in the tool result
MODEL_BACKOFF = Backoff(base_s=0.5, cap_s=8, jitter="full", max_attempts=3)  # SPEC §5.2, per model call
_RNG = random.Random()  # the model backoff's jitter


def progress_key(callback_id: str) -> str:
    return f"session:{callback_id}"


def progress(contract: Contract, status: str, **extra: Any) -> dict[str, dict[str, Any]]:
    """The session's progress checkpoint, as ``checkpoints`` for ``append_all``."""
    return {progress_key(contract.callback_id): {"status": status, **extra}}


class SessionRoles(SessionStore, CheckpointStore, ContractStore, WatcherStore, UsageStore, Protocol):
    """The store roles a hook session calls: its transcript and checkpoints, the callbacks it
    reads, what its tools read (``ToolBox``), and the usage counters of its budgets."""


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
    mcp: McpGate | None = None


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

    async def append(self, contract: Contract, entry: dict[str, Any]) -> dict[str, Any]:
        """Store ``entry`` in the transcript with secrets masked, and return what was stored.

        A message goes to the model as returned here, never as it was before masking: a tool
        result (a command's output, an observation) may hold a secret of the service.
        """
        return (await self.append_all(contract, [entry]))[0]

    async def append_all(
        self,
        contract: Contract,
        entries: list[dict[str, Any]],
        checkpoints: dict[str, dict[str, Any]] | None = None,
    ) -> list[dict[str, Any]]:
        """``append`` for several entries, in order, in one store step that also puts
        ``checkpoints`` (``progress``: the session's progress with the entries it follows)."""
        redactor = self._deps.redactor
        stored = [redactor.data({"callbackId": contract.callback_id, **entry}) for entry in entries]
        await self._deps.store.append_transcript(
            contract.session_key, stored, at=self._deps.clock.now(), checkpoints=checkpoints
        )
        return stored

    async def _progress(self, contract: Contract, status: str, **extra: Any) -> None:
        await self._deps.store.put_checkpoint(progress_key(contract.callback_id), {"status": status, **extra})

    async def run(self, contract: Contract) -> str:
        """Run the session to its end (or to a pause); the final status.

        A new session (no progress checkpoint yet) is marked ``running`` in the step that writes
        its first transcript entries, so a session without that mark has no entries of its own
        and its session's transcript need not be read (it grows with every callback of the key).
        Its contract, envelope and checkpoints are read in one step (``SessionStore.read_callback``).
        """
        deps = self._deps
        callback_id = contract.callback_id
        memory_key = memory.memory_key(contract.session_key)
        view = await deps.store.read_callback(
            callback_id,
            [progress_key(callback_id), message_key(callback_id), memory_key],
            tail=self._recall_tail(contract, memory_key),
        )
        checkpoints = view.checkpoints
        status = (checkpoints.get(progress_key(callback_id)) or {}).get("status")
        if status in FINAL:
            return str(status)
        current = view.contract
        if status is None and (current is None or current.state != "pending"):
            await self._progress(contract, "skipped")
            return "skipped"
        envelope = view.envelope
        if envelope is None:
            await self._progress(contract, "failed", error="envelope missing")
            return "failed"
        watcher = deps.watcher(contract.watcher_id) if envelope.source.route != "/hooks/sentinel" else None
        rendered = checkpoints.get(message_key(callback_id)) or {}
        if rendered.get("error"):
            await self._fail(contract, str(rendered["error"]))
            return "failed"
        backend = self._backend(watcher, envelope, rendered)
        box = ToolBox(
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
        )
        if status is not None and status != "running":  # resumed after an approval
            await self._progress(contract, "running")
        own = [] if status is None else await self._own_entries(contract)
        messages = [message for _, message in compaction.apply(own)]
        # counted on the uncompacted results: a summary or a cut may hide an earlier notify
        box.notified = notifies_in([e["message"] for _, e in own if e.get("kind") == "message"])
        if not messages:
            recalled, learned = await self._recall(
                contract, backend, checkpoints.get(memory_key), view.transcript
            )
            name, via = choose_model(watcher, deps.service)
            skill = session_skill(envelope.watcher.skill_id, deps.skill)
            first = [
                system_message(envelope.mode.autonomy),
                user_message(envelope, skill=skill, tools=box.offered, memory=recalled),
            ]
            stored = await self.append_all(
                contract,
                [
                    {"kind": "model", "model": backend.model, "entry": name, "via": via},
                    *({"kind": "message", "message": message} for message in first),
                ],
                {**progress(contract, "running"), **learned},
            )
            messages.extend(entry["message"] for entry in stored[1:])
        meter = Meter(
            store=deps.store,
            clock=deps.clock,
            service=deps.service,
            inbox=deps.inbox,
            events=deps.events,
            callback_id=callback_id,
            watcher_id=contract.watcher_id,
            session_key=contract.session_key,
            watcher_budget=None if watcher is None else watcher.fire.budget,
        )
        metering = METER.set(meter)  # the judge rules its actions meet count against it too
        try:
            return await self._loop(contract, backend, box, messages, meter)
        except ModelError as exc:
            await self._fail(contract, f"model {backend.name!r} failed: {exc}")
            return "failed"
        except BudgetExhausted as exc:
            return await self._out_of_budget(contract, exc)
        finally:
            METER.reset(metering)

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
        entries = await self._deps.store.get_transcript(contract.session_key)
        return [(e.seq, e.entry) for e in entries if e.entry.get("callbackId") == contract.callback_id]

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
        before = state.to_json()
        if tail is None or state.through_seq != memory.place(saved):  # a state started afresh
            tail = await store.get_transcript(contract.session_key, after_seq=state.through_seq)
        entries = tail
        state = memory.fold(state, entries, exclude=contract.callback_id)
        wanted = memory.wanted_envelopes(state)
        envelopes = await store.get_envelopes(wanted) if wanted else {}
        contracts: dict[str, str] = {}
        for callback_id in memory.unsettled(state):
            found = await store.get_contract(callback_id)
            if found is not None:
                contracts[callback_id] = found.state
        now = self._deps.clock.now()
        state = memory.bound(memory.learn(state, envelopes=envelopes, contracts=contracts), now)
        stored = state.to_json()
        # e.g. a session's first callback: nothing learned, nothing to write
        return memory.render(state, now), ({key: stored} if stored != before else {})

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
            reply, usage = await self._complete(
                backend, compaction.summary_request(middle, room), [], meter, "summary"
            )
            summary = compaction.summary_message(reply.text or "(no summary)")
            entry = {"kind": "compaction", "replaces": seqs, "message": summary, "usage": usage}
            await self.append(contract, entry)
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
        meter: Meter,
    ) -> str:
        tools = box.specs
        sizes = compaction.Sizes()
        turns = sum(1 for m in messages if m.get("role") == "assistant")
        while True:
            last = messages[-1]
            if last.get("role") == "assistant" and not last.get("toolCalls"):
                break
            if last.get("role") == "assistant" or (last.get("role") == "tool" and self._open_calls(messages)):
                stopped = await self._run_tools(contract, box, messages)
                if stopped == "paused":
                    return "paused"
                if stopped == "tripped":
                    return await self._trip(contract, box, messages)
                continue
            if self._tripped(messages):
                return await self._trip(contract, box, messages)
            if turns >= backend.max_turns:
                status = {"kind": "status", "status": "maxTurns", "turns": turns}
                await self.append_all(contract, [status], progress(contract, "done", turns=turns))
                return "done"
            messages[:] = await self._compact(contract, backend, messages, tools, sizes, meter)
            reply, usage = await self._complete(backend, messages, tools, meter, "turn")
            turns += 1
            message = reply.to_message()
            # the last reply (no tool calls) and the session's end are one step
            done = progress(contract, "done", turns=turns) if not message.get("toolCalls") else None
            entry = {"kind": "message", "message": message, "model": reply.model}
            if usage is not None:
                entry["usage"] = usage
            [stored] = await self.append_all(contract, [entry], done)
            messages.append(stored["message"])
            if done is not None:
                return "done"
        await self._progress(contract, "done", turns=turns)  # resumed after its last reply
        return "done"

    @staticmethod
    def _open_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Tool calls of the last assistant message that have no recorded result yet."""
        last_assistant = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
        if last_assistant is None:
            return []
        answered = {m.get("toolCallId") for m in messages if m.get("role") == "tool"}
        return [c for c in last_assistant.get("toolCalls") or [] if c.get("id") not in answered]

    def _tripped(self, messages: list[dict[str, Any]]) -> bool:
        """Whether the circuit breaker trips: ``circuitBreaker`` denials in a row in this callback."""
        return denial_streak(messages) >= self._deps.service.action_policy.circuit_breaker

    async def _trip(self, contract: Contract, box: ToolBox, messages: list[dict[str, Any]]) -> str:
        """Stop the session and escalate (SPEC §5.4): the model is not asked again, nothing more runs.

        The escalation is filed like ``sentinel_escalate``'s, so the fallback text carries it and
        people are still reached at the deadline; the breaker never allows anything.
        """
        streak = denial_streak(messages)
        log.warning(
            "session for %s stopped by the circuit breaker after %d denials in a row",
            contract.callback_id,
            streak,
            extra={"callbackId": contract.callback_id},
        )
        await self.append(contract, {"kind": "status", "status": "circuitBreaker", "denials": streak})
        await box.escalate(BREAKER_REASON, actor="sentinel")
        await self._progress(contract, "done", stopped="circuitBreaker", denials=streak)
        return "done"

    async def _run_tools(
        self, contract: Contract, box: ToolBox, messages: list[dict[str, Any]]
    ) -> str | None:
        """Execute the unanswered tool calls in order, recording each policy decision.

        ``"paused"`` when the session paused for an approval, ``"tripped"`` when the circuit
        breaker stops it before the next call (that call is never executed), else None.
        """
        import json

        for raw_call in self._open_calls(messages):
            if self._tripped(messages):
                return "tripped"
            call = ToolCall(
                str(raw_call.get("id")), str(raw_call.get("name")), raw_call.get("arguments") or {}
            )
            history = _command_history(messages, box.mcp_tools)
            try:
                result = await box.execute(call, history=history)
            except Paused as paused:
                self._tool_event(contract, call, "needs_approval", ok=False)
                if paused.policy is not None:
                    await self._record_policy(contract, call, dict(paused.policy))
                entry = {
                    "kind": "status",
                    "status": "paused",
                    "approvalId": paused.item_id,
                    "toolCallId": call.id,
                    "argv": paused.argv,
                }
                mark = progress(contract, "paused", approvalId=paused.item_id, toolCallId=call.id)
                await self.append_all(contract, [entry], mark)
                return "paused"
            policy = result.get("policy") if isinstance(result.get("policy"), dict) else None
            if policy is not None:
                # the model is told the decision and its reason; the verdicts are for people
                result = {**result, "policy": {k: v for k, v in policy.items() if k in MODEL_SEES}}
                await self._record_policy(contract, call, policy)
            decision = str(policy["decision"]) if policy else ("ok" if result.get("ok") else "error")
            self._tool_event(contract, call, decision, ok=bool(result.get("ok")))
            message = {
                "role": "tool",
                "toolCallId": call.id,
                "name": call.name,
                "content": json.dumps(result, ensure_ascii=False, default=str),
            }
            stored = await self.append(contract, {"kind": "message", "message": message})
            messages.append(stored["message"])
        return None

    async def _record_policy(self, contract: Contract, call: ToolCall, policy: dict[str, Any]) -> None:
        """One policy decision in the transcript (``kind: policy``) and in telemetry."""
        await self.append(contract, {"kind": "policy", "toolCallId": call.id, "tool": call.name, **policy})
        if self._deps.events is not None:
            self._deps.events.policy_decision(
                contract.callback_id, call.name, policy, watcher_id=contract.watcher_id
            )

    def _tool_event(self, contract: Contract, call: ToolCall, decision: str, *, ok: bool) -> None:
        if self._deps.events is not None:
            self._deps.events.tool_call(
                contract.callback_id,
                call.name,
                decision=decision,
                ok=ok,
                watcher_id=contract.watcher_id,
                arguments=call.arguments,
            )

    async def _complete(
        self,
        backend: ModelBackend,
        messages: list[dict[str, Any]],
        tools: list[ToolSpec],
        meter: Meter,
        call: Call,
    ) -> tuple[ModelReply, dict[str, Any] | None]:
        """One model call with SPEC §5.2 retries (``MODEL_BACKOFF``: 3 attempts, jittered 0.5 to 8 s),
        and its usage as recorded (None for the scripted backend, which calls no model).

        The budgets are checked first (``BudgetExhausted``: the call is not made) and the usage
        counted after (``Meter``). A plain loop, as a watcher's poll: a tenacity loop built per
        call cost about 240,000 instructions (callgrind), a tenth of the session's own work with
        an instant model (bench/RESULTS.md, issue 18.6, third round).
        """
        metered = not isinstance(backend, ScriptedBackend)
        if metered:
            await meter.check()
        started = time.perf_counter()
        attempt = 1
        while True:
            try:
                reply = await backend.complete(messages, tools)
                break
            except TransientModelError as exc:
                if MODEL_BACKOFF.exhausted(attempt):
                    raise
                await asyncio.sleep(MODEL_BACKOFF.delay_s(attempt, _RNG, retry_after_of(exc)))
                attempt += 1
        usage = await meter.record(backend.name, call, messages, reply, started) if metered else None
        return _recovered(reply, [t.name for t in tools]), usage

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


def _recovered(reply: ModelReply, names: list[str]) -> ModelReply:
    """Small-model robustness: a tool call written as JSON text becomes a real tool call."""
    if reply.tool_calls or not reply.text:
        return reply
    return recover_tool_calls(reply, names)


def _command_history(
    messages: list[dict[str, Any]], mcp_tools: dict[str, McpTool] | None = None
) -> list[str]:
    """Actions requested so far in this callback (for the loop guard), in order: commands, and
    calls of the callback's MCP tools (``policy.mcp_summary``)."""
    found: list[str] = []
    mcp_tools = mcp_tools or {}
    for message in messages:
        for call in message.get("toolCalls") or []:
            args = call.get("arguments")
            offered = mcp_tools.get(str(call.get("name")))
            if offered is not None and isinstance(args, dict):
                found.append(mcp_summary(offered.tool, args))
            elif (
                call.get("name") == "sentinel_act"
                and isinstance(args, dict)
                and args.get("action") == "run_command"
            ):
                found.append(" ".join([str(args.get("command", "")), *map(str, args.get("args") or [])]))
    return found[:-1] if found else found


def denial_streak(messages: list[dict[str, Any]]) -> int:
    """How many of this callback's latest tool results in a row are denials: refused by the
    policy (a rule, a judge or the loop guard), or an approval denied or expired."""
    import json

    streak = 0
    for message in messages:
        if message.get("role") != "tool":
            continue
        try:
            result = json.loads(message.get("content") or "{}")
        except (TypeError, ValueError):
            result = None
        streak = streak + 1 if _is_denial(result) else 0
    return streak


def _is_denial(result: object) -> bool:
    if not isinstance(result, dict):
        return False
    policy, approval = result.get("policy"), result.get("approval")
    if isinstance(policy, dict) and policy.get("decision") == "deny":
        return True
    return isinstance(approval, dict) and approval.get("status") in ("denied", "expired")


RESUMABLE: tuple[ContractState, ...] = ("pending", "notifying")


async def open_contracts(store: ContractStore) -> list[Contract]:
    """Contracts whose session may still have work to do after a restart (pending, or notifying:
    the agent notified and went on); paused sessions wait for their approval instead."""
    found: list[Contract] = []
    for state in RESUMABLE:
        cursor: str | None = None
        while True:
            page = await store.list_contracts(state=state, limit=500, cursor=cursor)
            found.extend(page.items)
            cursor = page.next_cursor
            if not cursor:
                break
    return found
