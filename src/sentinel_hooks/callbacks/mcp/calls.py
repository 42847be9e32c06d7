"""MCP tools in hook sessions (SPEC.md §17): which are offered, and every call through the action policy.

A watcher's ``fire.tools`` patterns (``server.tool``, globs in the tool part) pick the tools of
the connected servers; each is offered as ``server__tool`` with the server's own description and
JSON Schema. A literal pattern whose server is down (and has never listed its tools) is still
offered, with an open schema, so that the model's call gets an error result saying why.

Every call is an action (§5.4, ``action: mcp``, ``tool: server.tool``, ``arguments.<path>``):
``deny`` answers ``{ok: false, error: "denied: <rule id>: <reason>"}`` and the server never sees
the call; ``needs_approval`` files an approval item and pauses the session as for
``run_command`` (``policy/approvals.py`` resumes it with ``run_approved``); ``auto`` calls the server.
A result is the tool's text with secrets masked, cut at ``RESULT_CHARS``.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Sequence
from dataclasses import replace
from fnmatch import fnmatchcase
from typing import Any

from sentinel_hooks.callbacks.backends.base import ToolCall, ToolSpec
from sentinel_hooks.callbacks.mcp.client import McpCallError, McpServers, McpUnavailable
from sentinel_hooks.callbacks.policy.judge import Judges, overrule
from sentinel_hooks.callbacks.policy.rules import McpRequest, PolicyDecision, decide
from sentinel_hooks.callbacks.sessions.tools import McpTool, Paused, ToolBox
from sentinel_hooks.config.mcp import TOOL_SEPARATOR, pattern_server
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import ActionPolicySpec
from sentinel_hooks.inbox.items import Inbox
from sentinel_hooks.inbox.severity import severity_for

RESULT_CHARS = 4000
REASON_ARGUMENT_CHARS = 500  # arguments quoted in an approval item's reason
DEFAULT_RULE = "actionPolicy.default"  # named in a denial no rule decided
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what OpenAI and Anthropic accept
OPEN_SCHEMA: dict[str, Any] = {"type": "object"}


def offered_name(server: str, tool: str) -> str:
    return f"{server}{TOOL_SEPARATOR}{tool}"


class McpGate:
    """Offers MCP tools to a callback and decides, runs and approves their calls."""

    def __init__(
        self,
        *,
        servers: McpServers,
        policy: ActionPolicySpec,
        inbox: Inbox,
        redactor: Redactor,
        judges: Judges | None = None,
    ) -> None:
        self.servers = servers
        self._policy = policy
        self._inbox = inbox
        self._redactor = redactor
        self._judges = judges

    async def offer(self, patterns: Sequence[str]) -> dict[str, McpTool]:
        """The tools ``patterns`` pick, by the name the model calls; waits for starting servers."""
        names = list(dict.fromkeys(pattern_server(p) for p in patterns))
        connections = [self.servers.connections[n] for n in names if n in self.servers.connections]
        await asyncio.gather(*(c.ready() for c in connections))
        offered: dict[str, McpTool] = {}
        for pattern in patterns:
            server, _, wanted = pattern.partition(".")
            connection = self.servers.connections.get(server)
            if connection is None:
                continue
            listed = connection.tools
            if not listed and connection.state != "ready" and not _is_glob(wanted):
                self._add(offered, server, wanted, _unavailable(server, connection.error), OPEN_SCHEMA)
                continue
            for tool in listed:
                if fnmatchcase(tool.name, wanted):
                    about = f"[MCP server {server}] {tool.description}".strip()
                    self._add(offered, server, tool.name, about, tool.input_schema)
        return offered

    @staticmethod
    def _add(offered: dict[str, McpTool], server: str, tool: str, about: str, schema: dict[str, Any]) -> None:
        name = offered_name(server, tool)
        if TOOL_NAME.match(name) and name not in offered:
            offered[name] = McpTool(name, server, tool, ToolSpec(name, about, schema))

    def judge(
        self, box: ToolBox, tool: McpTool, arguments: dict[str, Any], *, history: list[str]
    ) -> tuple[McpRequest, PolicyDecision]:
        request = McpRequest(
            tool=tool.tool, arguments=arguments, watcher_id=box.contract.watcher_id, skill_id=box.skill_id
        )
        return request, decide(self._policy, request, history=history)

    async def request(
        self, box: ToolBox, call: ToolCall, tool: McpTool, arguments: dict[str, Any], *, history: list[str]
    ) -> dict[str, Any]:
        started = time.perf_counter()
        request, decision = self.judge(box, tool, arguments, history=history)
        if decision.decision == "auto" and self._judges:  # judge rules only once the plain rules allow
            proposal = {"action": "mcp", "tool": request.tool, "arguments": arguments}
            decision = overrule(decision, await self._judges.review("mcp", request.facts(), proposal))
        decision = replace(decision, elapsed_ms=(time.perf_counter() - started) * 1000)
        policy = {"policy": decision.to_json()}
        if decision.decision == "deny":
            return {"ok": False, "error": denial(decision), **policy}
        if decision.decision == "auto":
            return {**await self.call(tool.server, tool.tool_name, arguments), **policy}
        shown = json.dumps(arguments, ensure_ascii=False, default=str)
        if len(shown) > REASON_ARGUMENT_CHARS:
            shown = shown[: REASON_ARGUMENT_CHARS - 1] + "…"
        item = await self._inbox.create(
            "approval",
            severity=severity_for(box.contract.trigger.priority),
            reason=f"call MCP tool `{tool.tool}` with {shown}? {decision.reason}",
            watcher_id=box.contract.watcher_id,
            callback_id=box.contract.callback_id,
            session_key=box.contract.session_key,
            detail={
                "mcp": {"server": tool.server, "tool": tool.tool_name, "arguments": arguments},
                "toolName": call.name,
                "toolCallId": call.id,
                "policy": decision.to_json(),
            },
            actor="agent",
        )
        await box.relay.approval_requested(box.contract.callback_id)
        raise Paused(item.id, call, [request.tool, shown], self.servers.connections[tool.server].timeout_s)

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call the tool now; every failure is an error result for the model."""
        connection = self.servers.connections.get(server)
        if connection is None:
            return {"ok": False, "error": f"MCP server {server!r} is not configured"}
        try:
            outcome = await connection.call(tool, arguments)
        except (McpUnavailable, McpCallError) as exc:
            return {"ok": False, "tool": f"{server}.{tool}", "error": str(exc)}
        text = self._redactor.text(outcome.text)
        result: dict[str, Any] = {
            "ok": not outcome.is_error,
            "tool": f"{server}.{tool}",
            "content": text[:RESULT_CHARS],
        }
        if len(text) > RESULT_CHARS:
            result["truncated"] = f"cut at {RESULT_CHARS} of {len(text)} characters"
        if outcome.is_error:
            result["error"] = "the tool reported an error (see content)"
        return result

    async def run_approved(self, detail: dict[str, Any]) -> dict[str, Any]:
        """Run the call an approval item holds (``detail["mcp"]``), exactly as it was approved."""
        arguments = detail.get("arguments")
        if not isinstance(arguments, dict):
            arguments = {}
        return await self.call(str(detail.get("server")), str(detail.get("tool")), arguments)


def denial(decision: PolicyDecision) -> str:
    """``denied: <rule id>: <reason>`` (SPEC §17)."""
    return f"denied: {decision.rule_id or DEFAULT_RULE}: {decision.reason}"


def _is_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


def _unavailable(server: str, error: str | None) -> str:
    why = f": {error}" if error else ""
    return f"[MCP server {server}, not available now{why}] calling it returns an error"
