"""What a hook session does with the model's tool calls (SPEC.md §5.3, §5.4).

Each unanswered call of the model's last turn runs through the callback's ``ToolBox``, in order;
its result, and the policy decision that let it run or refused it, go into the transcript and
telemetry. An agent that keeps proposing denied actions is stopped by the circuit breaker and
escalated. The session runner (``session.py``) drives the conversation and decides when the
calls run; this module owns running and recording them.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Protocol

from sentinel_hooks.callbacks.backends.base import ToolCall
from sentinel_hooks.callbacks.policy.rules import mcp_summary
from sentinel_hooks.callbacks.sessions.progress import progress
from sentinel_hooks.callbacks.sessions.tools import McpTool, Paused, ToolBox
from sentinel_hooks.events import Events
from sentinel_hooks.store.records import Contract

log = logging.getLogger(__name__)

BREAKER_REASON = "the agent kept proposing denied actions"
MODEL_SEES = ("decision", "ruleId", "reason")  # of a policy decision, in the tool result


class Transcript(Protocol):
    """Where the tool calls' records go: the session runner's transcript writes (``append_all``
    masks secrets and puts the progress checkpoints given with the entries; ``hold`` defers the
    write to the callback's next one) and its progress mark."""

    async def append(
        self, contract: Contract, entry: dict[str, Any], *, hold: bool = False
    ) -> dict[str, Any]: ...

    async def append_all(
        self,
        contract: Contract,
        entries: list[dict[str, Any]],
        checkpoints: dict[str, dict[str, Any]] | None = None,
        *,
        hold: bool = False,
    ) -> list[dict[str, Any]]: ...

    async def mark(self, contract: Contract, status: str, **extra: Any) -> None: ...


def _retried_safely(call: ToolCall, result: dict[str, Any]) -> bool:
    """Whether the call's result may wait for the session's next write (the reply to it, a
    status, a mark): a notify handed to delivery (its result carries the ordinal). Lost in a
    crash, it is tried again on resume with the same ordinal (``notifies_in``), hence the same
    delivery keys, which adds nothing and reports what became of the first try (``Relay.notify``)."""
    return call.name == "sentinel_act" and isinstance(result.get("notify"), int)


def open_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool calls of the last assistant message that have no recorded result yet."""
    last_assistant = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
    if last_assistant is None:
        return []
    answered = {m.get("toolCallId") for m in messages if m.get("role") == "tool"}
    return [c for c in last_assistant.get("toolCalls") or [] if c.get("id") not in answered]


class ToolCalls:
    """Runs and records the tool calls of one service's sessions; ``circuit_breaker`` denials in
    a row stop a session (``actionPolicy.circuitBreaker``)."""

    def __init__(self, transcript: Transcript, *, circuit_breaker: int, events: Events | None = None) -> None:
        self._transcript = transcript
        self._circuit_breaker = circuit_breaker
        self._events = events

    def tripped(self, messages: list[dict[str, Any]]) -> bool:
        """Whether the circuit breaker trips: ``circuitBreaker`` denials in a row in this callback."""
        return denial_streak(messages) >= self._circuit_breaker

    async def run(
        self, contract: Contract, box: ToolBox, messages: list[dict[str, Any]], *, hold: bool = False
    ) -> str | None:
        """Execute the unanswered tool calls in order, recording each policy decision, and append
        each result to ``messages`` as stored.

        ``"paused"`` when the session paused for an approval, ``"tripped"`` when the circuit
        breaker stops it before the next call (that call is never executed), else None. With
        ``hold`` the results are written with the callback's next append; so is a notify's result
        always (``_retried_safely``): one write less per notify.
        """
        for raw_call in open_calls(messages):
            if self.tripped(messages):
                return "tripped"
            call = ToolCall(
                str(raw_call.get("id")), str(raw_call.get("name")), raw_call.get("arguments") or {}
            )
            try:
                result = await box.execute(call, history=command_history(messages, box.mcp_tools))
            except Paused as paused:
                await self._paused(contract, call, paused)
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
            stored = await self._transcript.append(
                contract, {"kind": "message", "message": message}, hold=hold or _retried_safely(call, result)
            )
            messages.append(stored["message"])
        return None

    async def trip(self, contract: Contract, box: ToolBox, messages: list[dict[str, Any]]) -> str:
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
        await self._transcript.append(
            contract, {"kind": "status", "status": "circuitBreaker", "denials": streak}
        )
        await box.escalate(BREAKER_REASON, actor="sentinel")
        await self._transcript.mark(contract, "done", stopped="circuitBreaker", denials=streak)
        return "done"

    async def _paused(self, contract: Contract, call: ToolCall, paused: Paused) -> None:
        """The call waits for an approval: its policy decision, then the pause with its mark."""
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
        await self._transcript.append_all(contract, [entry], mark)

    async def _record_policy(self, contract: Contract, call: ToolCall, policy: dict[str, Any]) -> None:
        """One policy decision in the transcript (``kind: policy``) and in telemetry."""
        await self._transcript.append(
            contract, {"kind": "policy", "toolCallId": call.id, "tool": call.name, **policy}
        )
        if self._events is not None:
            self._events.policy_decision(
                contract.callback_id, call.name, policy, watcher_id=contract.watcher_id
            )

    def _tool_event(self, contract: Contract, call: ToolCall, decision: str, *, ok: bool) -> None:
        if self._events is not None:
            self._events.tool_call(
                contract.callback_id,
                call.name,
                decision=decision,
                ok=ok,
                watcher_id=contract.watcher_id,
                arguments=call.arguments,
            )


def command_history(messages: list[dict[str, Any]], mcp_tools: dict[str, McpTool] | None = None) -> list[str]:
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
