"""Dry-run executors for replay and evaluation (SPEC §22).

A dry run is chosen when a session's tools are built, by handing the ``ToolBox`` these executors
instead of the real ones: nothing else in the session checks a flag. The policy is still asked
(its decision is what a replay shows), but nothing runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sentinel_hooks.callbacks.policy.approvals import CommandGate
from sentinel_hooks.callbacks.policy.rules import McpRequest, decide
from sentinel_hooks.config.service import ActionPolicySpec

if TYPE_CHECKING:
    from sentinel_hooks.callbacks.backends.base import ToolCall
    from sentinel_hooks.callbacks.mcp.calls import McpGate
    from sentinel_hooks.callbacks.sessions.tools import ActArgs, McpTool, ToolBox

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


@dataclass
class DryRunMcp:
    """An ``McpCaller`` stand-in: asks the action policy about each MCP call, and calls the tool
    only when its server is one of ``read_only`` (``readOnly: true``) and the policy does not
    deny it; every other call gets ``NOT_EXECUTED``."""

    gate: McpGate
    policy: ActionPolicySpec
    read_only: frozenset[str]
    judged: list[dict[str, Any]] = field(default_factory=list)

    async def offer(self, patterns: Sequence[str]) -> dict[str, McpTool]:
        """The tools offered are the real ones: the model sees what it would see in a fire."""
        return await self.gate.offer(patterns)

    async def request(
        self, box: ToolBox, call: ToolCall, tool: McpTool, arguments: dict[str, Any], *, history: list[str]
    ) -> dict[str, Any]:
        return await self.decide(
            call.id,
            tool,
            arguments,
            watcher_id=box.contract.watcher_id,
            skill_id=box.skill_id,
            history=history,
        )

    async def decide(
        self,
        call_id: str,
        tool: McpTool,
        arguments: dict[str, Any],
        *,
        watcher_id: str,
        skill_id: str | None,
        history: list[str],
    ) -> dict[str, Any]:
        """The dry-run result of one MCP call: the policy's decision, and the tool's answer when it ran."""
        request = McpRequest(tool=tool.tool, arguments=arguments, watcher_id=watcher_id, skill_id=skill_id)
        policy = decide(self.policy, request, history=history).to_json()
        runs = tool.server in self.read_only and policy["decision"] != "deny"
        self.judged.append({"toolCallId": call_id, "tool": tool.tool, "policy": policy, "executed": runs})
        if not runs:
            return {"ok": False, "error": NOT_EXECUTED, "policy": policy}
        return {**await self.gate.call(tool.server, tool.tool_name, arguments), "policy": policy}
