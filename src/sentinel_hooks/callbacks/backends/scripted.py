"""The ``scripted`` backend: no LLM, deterministic (SPEC.md §5.2).

It notifies the watcher's targets with the fire's message (``fire.messageTemplate``
rendered at fire time, else ``message_for``: a concise line with event, watcher, priority
and a payload summary), or escalates instead when ``fire.escalate`` is true. It lets the
whole pipeline run with no model, and is the default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sentinel_hooks.callbacks.backends.base import ModelReply, ToolCall, ToolSpec
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import ScriptedModel
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.relay.fallback import default_message


def message_for(envelope: Envelope) -> str:
    """The default message for a callback whose watcher has no ``fire.messageTemplate``."""
    return default_message(
        event_name=envelope.watcher.event_name,
        watcher_id=envelope.watcher.id,
        priority=envelope.trigger.priority,
        payload=envelope.payload,
    )


@dataclass
class ScriptedPlan:
    """What the scripted backend does for one callback."""

    message: str
    escalate: bool = False
    escalation_reason: str | None = None


class ScriptedBackend:
    """Answers with one tool call (notify, or escalate), then stops."""

    model = "scripted"
    max_turns = 3

    def __init__(self, name: str, plan: ScriptedPlan | None = None) -> None:
        self.name = name
        self.plan = plan

    def for_callback(self, plan: ScriptedPlan) -> ScriptedBackend:
        return ScriptedBackend(self.name, plan)

    async def complete(self, messages: list[dict[str, Any]], tools: list[ToolSpec]) -> ModelReply:
        if any(m.get("role") == "tool" for m in messages) or self.plan is None:
            return ModelReply(text="done", model=self.model)
        offered = {t.name for t in tools}
        if (self.plan.escalate or "sentinel_act" not in offered) and "sentinel_escalate" in offered:
            reason = self.plan.escalation_reason or self.plan.message
            call = ToolCall("scripted-1", "sentinel_escalate", {"reason": reason})
        else:
            call = ToolCall("scripted-1", "sentinel_act", {"action": "notify", "message": self.plan.message})
        return ModelReply(text=None, tool_calls=[call], model=self.model)

    async def close(self) -> None:
        return None


def create(name: str, spec: ScriptedModel, *, redactor: Redactor | None = None) -> ScriptedBackend:
    """The backend for a ``type: scripted`` entry (it sends nothing anywhere, so masks nothing)."""
    return ScriptedBackend(name)
