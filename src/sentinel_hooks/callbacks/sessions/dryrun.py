"""Dry-run executors for replay and evaluation (SPEC §22).

A dry run is chosen when a session's tools are built, by handing the ``ToolBox`` these executors
instead of the real ones: nothing else in the session checks a flag. The policy is still asked
(its decision is what a replay shows), but nothing runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sentinel_hooks.callbacks.policy.approvals import CommandGate

if TYPE_CHECKING:
    from sentinel_hooks.callbacks.backends.base import ToolCall
    from sentinel_hooks.callbacks.sessions.tools import ActArgs, ToolBox

NOT_EXECUTED = "dry run: not executed"
"""The error the model gets for an action a dry run does not carry out."""


@dataclass
class DryRunCommands:
    """A ``CommandGate`` stand-in: judges ``run_command`` with the real policy, never runs it,
    and keeps each request with its decision for the replay's report."""

    gate: CommandGate
    judged: list[dict[str, Any]] = field(default_factory=list)

    async def request(
        self, box: ToolBox, call: ToolCall, act: ActArgs, *, history: list[str]
    ) -> dict[str, Any]:
        return self.decide(
            call.id, act, watcher_id=box.contract.watcher_id, skill_id=box.skill_id, history=history
        )

    def decide(
        self, call_id: str, act: ActArgs, *, watcher_id: str, skill_id: str | None, history: list[str]
    ) -> dict[str, Any]:
        """The dry-run result of one request: the policy's decision, and that nothing ran."""
        request, _located, decision = self.gate.judge(
            act, watcher_id=watcher_id, skill_id=skill_id, history=history
        )
        policy = decision.to_json()
        self.judged.append({"toolCallId": call_id, "argv": request.argv, "policy": policy})
        return {"ok": False, "error": NOT_EXECUTED, "policy": policy}
