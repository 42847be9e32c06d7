"""The sentinel tools (SPEC.md §5.3): argument models, their JSON Schemas, and what they do.

A ToolBox is built for ONE callback: every call is bound to that callback's contract and
targets, so a session can never fulfil another callback or reach another session's targets.
Bad arguments come back to the model as a precise error result (so it can retry), never as
an exception.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Literal, Protocol, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema, model_validator

from sentinel_hooks.callbacks.backends.base import ToolCall, ToolSpec
from sentinel_hooks.callbacks.policy.judge import Judges, overrule
from sentinel_hooks.callbacks.policy.rules import PolicyDecision
from sentinel_hooks.callbacks.sessions.priorities import GroupPriorities
from sentinel_hooks.clock import Clock, iso
from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.core.contract_states import FINAL_STATES
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.core.grouping import PRIORITY_ORDER
from sentinel_hooks.delivery.targets.base import Message, details_payload
from sentinel_hooks.events import Events
from sentinel_hooks.inbox.items import Inbox
from sentinel_hooks.inbox.severity import severity_for
from sentinel_hooks.relay.relay import NotifyOutcome, Relay, escalation_key
from sentinel_hooks.store.base import CheckpointStore, ContractStore, WatcherStore
from sentinel_hooks.store.records import Contract, Severity, notify_kind

CONTROL_TOKENS = ("NO_REPLY", "HEARTBEAT_OK", "ANNOUNCE_SKIP", "REPLY_SKIP")
"""What agent runtimes (OpenClaw's among them) read as "say nothing" rather than as a message.
Each has an underscore, so no ordinary word ("done", "ack", "skip") is one of them."""
CONTROL_TOKEN = re.compile(
    r"^\s*[\[(*`'\"]*\s*(" + "|".join(CONTROL_TOKENS) + r")\s*[\])*`'\".]*\s*$", re.IGNORECASE
)
"""A whole message that is a control token, in any case, perhaps wrapped in brackets, quotes or
markdown emphasis (``[NO_REPLY]``, ```HEARTBEAT_OK```)."""


class ToolArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ActArgs(ToolArgs):
    """``sentinel_act``: notify people, or run a command (through the action policy)."""

    action: Literal["notify", "run_command"]
    message: str | None = Field(default=None, description="notify: the message people receive")
    targets: list[str] | None = Field(
        default=None, description="notify: target names (default: the watcher's)"
    )
    command: str | None = Field(default=None, description="run_command: the program to run")
    args: list[str] | None = Field(default=None, description="run_command: its arguments")
    timeoutMs: int | None = Field(
        default=None, ge=1000, le=120000, description="run_command: timeout (default 30000)"
    )

    @model_validator(mode="after")
    def _fields_of_action(self) -> ActArgs:
        if self.action == "notify":
            if self.message is None:
                raise ValueError('action "notify" needs "message"')
            if self.command is not None or self.args is not None or self.timeoutMs is not None:
                raise ValueError('action "notify" takes "message" and "targets" only')
        else:
            if not self.command:
                raise ValueError('action "run_command" needs "command"')
            if self.message is not None or self.targets is not None:
                raise ValueError('action "run_command" takes "command", "args" and "timeoutMs" only')
        return self


def _no_default(schema: dict[str, Any]) -> None:
    """Leave ``default`` out of a property's schema (a null default reads as a value to send)."""
    schema.pop("default", None)


class EscalateArgs(ToolArgs):
    """``sentinel_escalate``: a human must decide; files an inbox item."""

    reason: str = Field(min_length=1, max_length=4000)
    # Offered as an optional string (no null, no default): left out, it follows the fire's priority.
    severity: Annotated[
        Severity | None, WithJsonSchema({"type": "string", "enum": list(get_args(Severity))})
    ] = Field(
        default=None,
        description="default: from the fire's priority (critical → critical, low → info, else warning)",
        json_schema_extra=_no_default,
    )


class HistoryArgs(ToolArgs):
    """``sentinel_history``: this watcher's recent observations."""

    limit: int = Field(default=20, ge=1, le=500)
    sinceMs: int | None = Field(
        default=None, ge=0, description="only observations newer than this many ms ago"
    )


def _schema(model: type[ToolArgs]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    schema["additionalProperties"] = False
    return schema


TOOL_SPECS: dict[str, ToolSpec] = {
    "sentinel_act": ToolSpec(
        "sentinel_act",
        'Act on this callback. action "notify" delivers "message" to people '
        "(the only way your words reach them); "
        'action "run_command" runs "command" with "args" (no shell), subject to the action policy.',
        _schema(ActArgs),
    ),
    "sentinel_escalate": ToolSpec(
        "sentinel_escalate",
        "Ask a human to decide: files an inbox item with the reason. It does not notify by itself.",
        _schema(EscalateArgs),
    ),
    "sentinel_history": ToolSpec(
        "sentinel_history",
        "This watcher's recent observations (time and value), newest first.",
        _schema(HistoryArgs),
    ),
}


def _notify_only(schema: dict[str, Any]) -> dict[str, Any]:
    """``sentinel_act``'s schema with ``run_command`` taken out: action "notify" and its fields only."""
    properties = {k: v for k, v in schema["properties"].items() if k in ("action", "message", "targets")}
    properties["action"] = {**properties["action"], "enum": ["notify"]}
    return {**schema, "description": "``sentinel_act``: notify people.", "properties": properties}


NOTIFY_ONLY_ACT = ToolSpec(
    "sentinel_act",
    'Act on this callback. action "notify" delivers "message" to people '
    "(the only way your words reach them).",
    _notify_only(_schema(ActArgs)),
)


def tool_specs(autonomy: str) -> list[ToolSpec]:
    """The tools offered under ``mode.autonomy``, as the model is told of them: ``act`` all;
    ``notify_only`` a ``sentinel_act`` whose schema knows no ``run_command``; ``escalate_only``
    ``sentinel_escalate`` and ``sentinel_history`` only. A model is never offered what it would
    be refused."""
    escalate, history = TOOL_SPECS["sentinel_escalate"], TOOL_SPECS["sentinel_history"]
    if autonomy == "escalate_only":
        return [escalate, history]
    act = NOTIFY_ONLY_ACT if autonomy == "notify_only" else TOOL_SPECS["sentinel_act"]
    return [act, escalate, history]


def tools_for(autonomy: str) -> list[str]:
    """The names of the tools offered under ``mode.autonomy`` (``tool_specs``)."""
    return [spec.name for spec in tool_specs(autonomy)]


class Paused(Exception):
    """run_command needs approval: the session pauses until the approval item is decided."""

    def __init__(
        self,
        item_id: str,
        call: ToolCall,
        argv: list[str],
        timeout_s: float,
        *,
        policy: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(item_id)
        self.item_id = item_id
        self.call = call
        self.argv = argv
        self.timeout_s = timeout_s
        self.policy = policy  # the decision that asked for approval (PolicyDecision.to_json)


@dataclass(frozen=True)
class McpTool:
    """An MCP tool offered to one callback (SPEC §17): ``name`` (``server__tool``) is what the
    model calls, ``tool`` (``server.tool``) what the policy and people see."""

    name: str
    server: str
    tool_name: str
    spec: ToolSpec

    @property
    def tool(self) -> str:
        return f"{self.server}.{self.tool_name}"


class McpCaller(Protocol):
    """Decides and runs calls of MCP tools (policy, approvals, the server)."""

    async def request(
        self, box: ToolBox, call: ToolCall, tool: McpTool, arguments: dict[str, Any], *, history: list[str]
    ) -> dict[str, Any]: ...


class CommandGate(Protocol):
    """Decides and runs ``run_command`` requests (policy, approvals, execution)."""

    async def request(
        self, box: ToolBox, call: ToolCall, act: ActArgs, *, history: list[str]
    ) -> dict[str, Any]: ...


FIRE_RESOLVED = "the fire resolved"
"""The error of a notify after its fire resolved before its page (SPEC §6.4)."""


def too_late(state: str | None) -> str:
    """The error result of a notify the contract refused (it takes no message at all: deduped,
    silenced; after the deadline a notify is a follow-up, SPEC §6.4)."""
    return (
        f"too late: the response deadline passed and this fire takes no more messages "
        f"(contract {state or 'unknown'}); nothing was sent — use sentinel_escalate to add to the inbox"
    )


def notifies_in(messages: list[dict[str, Any]]) -> int:
    """How many notifies of this callback were handed to delivery (their tool results carry
    ``notify``, the ordinal): the next one is this plus one. Counted from the transcript, so a
    resumed session numbers a repeated tool call as the first try did (same delivery keys)."""
    count = 0
    for message in messages:
        if message.get("role") != "tool" or message.get("name") != "sentinel_act":
            continue
        try:
            result = json.loads(message.get("content") or "{}")
        except (TypeError, ValueError):
            continue
        if isinstance(result, dict) and isinstance(result.get("notify"), int):
            count = max(count, result["notify"])
    return count


def follow_up_result(ordinal: int, outcome: NotifyOutcome) -> dict[str, Any]:
    """The tool result of a notify after the page (SPEC §6.4): always ``ok``, since the outbox
    delivers it durably (retries, then a dead letter that keeps it in the inbox)."""
    result: dict[str, Any] = {
        "ok": True,
        "deliveredAs": "followup",
        "notify": ordinal,
        "delivered": outcome.delivered,
        "retrying": outcome.retrying,
        "failed": outcome.failed,
        "contract": outcome.state,
        "note": "people were already paged about this fire; this message follows up on that page",
    }
    if outcome.left_out:
        result["leftOut"] = outcome.left_out
    return result


class ToolRoles(WatcherStore, CheckpointStore, ContractStore, Protocol):
    """The store roles the tools call: a watcher's observations, the escalation note, and a
    group's members (the priority its messages page with)."""


@dataclass
class ToolBox:
    """The tools of one callback. ``notified`` counts the notifies handed to delivery so far
    (each is its own message with its own key: ``notify``, ``notify.2``…); ``settled`` is set
    when a notify found the contract in a final state (its page sent: it changes no more)."""

    envelope: Envelope
    contract: Contract
    store: ToolRoles
    relay: Relay
    inbox: Inbox
    clock: Clock
    service: ServiceConfig
    commands: CommandGate
    skill_id: str | None = None
    events: Events | None = None
    judges: Judges | None = None  # the judge rules that check notify messages (appliesTo: notify)
    notified: int = 0
    settled: bool = False
    mcp: McpCaller | None = None
    mcp_tools: dict[str, McpTool] = field(default_factory=dict)  # by the name the model calls
    priorities: GroupPriorities = field(default_factory=GroupPriorities)  # a group's, read so far

    @property
    def offered(self) -> list[str]:
        return [*tools_for(self.envelope.mode.autonomy), *self.mcp_tools]

    @property
    def specs(self) -> list[ToolSpec]:
        """The tools sent to the model (``tool_specs`` of this callback's autonomy, then its MCP tools)."""
        return [*tool_specs(self.envelope.mode.autonomy), *(t.spec for t in self.mcp_tools.values())]

    async def execute(self, call: ToolCall, *, history: list[str]) -> dict[str, Any]:
        """The JSON result of ``call`` (errors are results too); raises Paused for approvals."""
        if call.name not in self.offered:
            known = ", ".join(self.offered)
            return {"ok": False, "error": f"unknown tool {call.name!r}; available tools: {known}"}
        arguments = call.arguments
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return {"ok": False, "error": f"arguments are not valid JSON ({exc.msg}); send a JSON object"}
        if not isinstance(arguments, dict):
            return {"ok": False, "error": "arguments must be a JSON object"}
        mcp_tool = self.mcp_tools.get(call.name)
        if mcp_tool is not None and self.mcp is not None:
            return await self.mcp.request(self, call, mcp_tool, arguments, history=history)
        try:
            if call.name == "sentinel_act":
                act = ActArgs.model_validate(arguments)
                if act.action == "notify":
                    return await self._notify(act)
                if self.envelope.mode.autonomy != "act":
                    return {"ok": False, "error": "run_command is not available under autonomy notify_only"}
                return await self.commands.request(self, call, act, history=history)
            if call.name == "sentinel_escalate":
                return await self._escalate(EscalateArgs.model_validate(arguments))
            return await self._history(HistoryArgs.model_validate(arguments))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
            )
            return {"ok": False, "error": f"invalid arguments for {call.name}: {problems}"}

    def _allowed_targets(self) -> list[str]:
        return list(dict.fromkeys([*self.envelope.delivery.targets, *self.service.escalation_targets]))

    async def _notify(self, act: ActArgs) -> dict[str, Any]:
        text = (act.message or "").strip()
        if not text:
            return {"ok": False, "error": "message is empty; write what people need to know"}
        if CONTROL_TOKEN.match(text):
            return {
                "ok": False,
                "error": f"{text!r} is a control token, not a message; write what people need to know",
            }
        allowed = self._allowed_targets()
        targets = act.targets if act.targets is not None else list(self.envelope.delivery.targets)
        refused = [t for t in targets if t not in allowed]
        if refused:
            return {
                "ok": False,
                "error": f"target {refused[0]!r} is not allowed; allowed: {', '.join(allowed)}",
            }
        if not targets:
            return {"ok": False, "error": "no targets: this watcher has no deliveryTargets"}
        judged = await self._judge_notify(text, targets)
        if judged is not None and judged.decision != "auto":
            return {
                "ok": False,
                "error": f"denied by policy: {judged.reason}; nothing was sent",
                "policy": judged.to_json(),
            }
        routed = ["console"] if self.envelope.mode.environment == "test" else targets
        ordinal = self.notified + 1
        message = Message(
            callback_id=self.contract.callback_id,
            watcher_id=self.contract.watcher_id,
            event_name=self.envelope.watcher.event_name,
            priority=await self._priority(),
            kind=notify_kind(ordinal),
            text=text,
            payload=details_payload(self.envelope.payload),
        )
        outcome = await self.relay.notify(self.contract, message, routed)
        if not outcome.accepted:
            if outcome.state == "resolved":  # the source reported it over before anything paged
                return {"ok": False, "error": FIRE_RESOLVED}
            return {"ok": False, "delivered": [], "error": too_late(outcome.state)}
        self.notified = ordinal
        self.settled = self.settled or outcome.state in FINAL_STATES
        if outcome.follow_up:
            return follow_up_result(ordinal, outcome)
        result: dict[str, Any] = {
            "ok": bool(outcome.delivered or outcome.retrying),
            "notify": ordinal,
            "delivered": outcome.delivered,
            "retrying": outcome.retrying,
            "failed": outcome.failed,
            "contract": outcome.state,
        }
        if judged is not None:
            result["policy"] = judged.to_json()
        if not outcome.delivered and outcome.retrying:
            result["note"] = (
                "no target accepted it yet; it is being retried, so do not send it again "
                "(people get the fallback instead only if every retry fails)"
            )
        elif not result["ok"]:
            result["error"] = (
                "every target refused the message for good; it is kept in the inbox "
                "and people get the fallback instead"
            )
        return result

    async def _priority(self) -> str:
        """The fire's priority; a group's is the most urgent of its members' (SPEC §19: watchers
        sharing a group ``name`` may differ), read as the group stands now, as its fallback and
        follow-ups page with it."""
        contract = self.contract
        if contract.group is None or contract.trigger.priority == PRIORITY_ORDER[-1]:
            return contract.trigger.priority  # none is more urgent than the group's own
        now = await self.store.get_contract(contract.callback_id)
        group = now.group if now is not None and now.group is not None else contract.group
        own = contract.trigger.priority
        return await self.priorities.highest(self.store, contract.callback_id, own, group.members)

    async def _judge_notify(self, text: str, targets: list[str]) -> PolicyDecision | None:
        """The judge rules' decision about this message (None when no rule checks notifies here)."""
        if not self.judges:
            return None
        started = time.perf_counter()
        facts = {"watcherId": self.contract.watcher_id, "skillId": self.skill_id}
        proposal = {"action": "notify", "message": text, "targets": targets}
        verdicts = await self.judges.review("notify", facts, proposal)
        if not verdicts:
            return None
        allowed = PolicyDecision("auto", None, "No judge rule in scope objected to the message.")
        return replace(overrule(allowed, verdicts), elapsed_ms=(time.perf_counter() - started) * 1000)

    async def escalate(self, reason: str, *, actor: str) -> dict[str, Any]:
        """File an escalation for this callback, as ``sentinel_escalate`` does, by ``actor``."""
        return await self._escalate(EscalateArgs(reason=reason), actor=actor)

    async def _escalate(self, args: EscalateArgs, *, actor: str = "agent") -> dict[str, Any]:
        severity = args.severity or severity_for(await self._priority())
        item = await self.inbox.create(
            "escalation",
            severity=severity,
            reason=args.reason,
            watcher_id=self.contract.watcher_id,
            callback_id=self.contract.callback_id,
            session_key=self.contract.session_key,
            detail={"envelope": self.envelope.to_json()},
            actor=actor,
        )
        await self.store.put_checkpoint(
            escalation_key(self.contract.callback_id), {"severity": severity, "reason": args.reason}
        )
        return {
            "ok": True,
            "inboxItemId": item.id,
            "severity": severity,
            "note": "escalated; people still get the fallback at the deadline unless you notify",
        }

    async def _history(self, args: HistoryArgs) -> dict[str, Any]:
        since = None
        if args.sinceMs is not None:
            from datetime import timedelta

            since = self.clock.now() - timedelta(milliseconds=args.sinceMs)
        kept = self.service.retention.observations_per_watcher or args.limit  # 0: no limit
        found = await self.store.observations(
            self.contract.watcher_id, limit=min(args.limit, kept), since=since
        )
        budget = self.service.limits.max_payload_chars * 4
        items: list[dict[str, Any]] = []
        for observation in found:
            entry = {"at": iso(observation.at), "value": observation.value}
            budget -= len(json.dumps(entry, default=str))
            if budget < 0:
                break
            items.append(entry)
        return {"ok": True, "observations": items, "truncated": len(items) < len(found)}
