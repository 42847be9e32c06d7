"""The MCP server: the SDK's low-level ``Server`` answering ``tools/list`` and ``tools/call`` with
the tools of ``tools.py``, whatever carries the API calls (``Backend``).

A call's arguments are checked against the tool's schema first (an error result naming the
argument, as the API names a key), then made into its ``ApiCall`` and handed to the backend. The
result carries the API's JSON twice, as the MCP spec suggests: as ``structuredContent`` and as
text; an answer of 400 or more is an error result whose JSON is the API's ``{"error": …}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import mcp_types as types
from jsonschema import Draft202012Validator
from mcp.server.lowlevel import Server

from sentinel_hooks import __version__
from sentinel_hooks.core.roles import Role, allows
from sentinel_hooks.mcp_server.backend import Answer, Backend, error_body
from sentinel_hooks.mcp_server.tools import ApiCall, Tool, offered_tools

SERVER_NAME = "sentinel"
NO_APPROVALS = (
    " (approvals are a person's decision: the service offers them to agents only with "
    "server.mcpApprovals: true)"
)
INSTRUCTIONS = (
    "Sentinel watches APIs, feeds and processes and wakes an agent only when something matters. "
    "These tools manage its watchers (list, inspect, create, enable, disable, delete, fire), follow "
    "what a fire did (callbacks), handle the operator inbox (acknowledge, resolve) and silence "
    "fires for a while. Results are the JSON of Sentinel's HTTP API; errors are "
    '{"error": {"code", "message", "details"}}.'
)


def tool_result(answer: Answer, call: ApiCall) -> types.CallToolResult:
    """The MCP result of an API answer (a 204 becomes ``{"deleted": id}``: MCP results are not empty)."""
    body = answer.body
    if answer.status == 204 or body is None:
        body = {"deleted": call.ids.get("id")} if call.method == "DELETE" else {}
    text = json.dumps(body, ensure_ascii=False)
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        structured_content=body if isinstance(body, dict) else None,
        is_error=answer.status >= 400,
    )


def _error_result(code: str, message: str, details: Any = None) -> types.CallToolResult:
    body = error_body(code, message, details)
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(body, ensure_ascii=False))],
        structured_content=body,
        is_error=True,
    )


def _argument_errors(validator: Draft202012Validator, arguments: dict[str, Any]) -> list[dict[str, str]]:
    """Each problem of ``arguments`` against the tool's schema as ``{key, message}``."""
    found = sorted(validator.iter_errors(arguments), key=lambda e: list(map(str, e.absolute_path)))
    return [{"key": ".".join(map(str, e.absolute_path)) or "arguments", "message": e.message} for e in found]


def _describe(tool: Tool) -> types.Tool:
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=tool.schema,
        annotations=types.ToolAnnotations(
            read_only_hint=tool.read_only,
            destructive_hint=tool.destructive,
            open_world_hint=False,
        ),
    )


def _no_role() -> Role | None:
    return None


def may_call(tool: Tool, role: Role | None) -> bool:
    """Whether a caller of ``role`` may call ``tool`` (None: no tokens, anything the service offers),
    from the role its endpoint declares (SPEC §21)."""
    return role is None or tool.endpoint.role is None or allows(role, tool.endpoint.role)


def build_server(
    backend: Backend, *, approvals: bool, role: Callable[[], Role | None] = _no_role
) -> Server[Any]:
    """An MCP server offering Sentinel's tools (approve/deny only with ``approvals``); each
    request is offered only the tools the caller's ``role()`` may call, and refused the others."""
    tools = offered_tools(approvals=approvals)
    described = {name: _describe(tool) for name, tool in tools.items()}
    validators = {name: Draft202012Validator(tool.schema) for name, tool in tools.items()}

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        caller = role()
        return types.ListToolsResult(tools=[described[n] for n, t in tools.items() if may_call(t, caller)])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = tools.get(params.name)
        caller = role()
        if tool is not None and not may_call(tool, caller):
            needed = tool.endpoint.role
            message = f"the tool {tool.name} needs the role {needed}; this token has {caller}"
            return _error_result("forbidden", message, {"role": caller, "needed": needed})
        if tool is None:
            hint = "" if approvals or params.name not in ("approve", "deny") else NO_APPROVALS
            return _error_result("unknown_tool", f"no tool {params.name!r}{hint}", {"tools": list(tools)})
        arguments = params.arguments or {}
        problems = _argument_errors(validators[tool.name], arguments)
        if problems:
            text = "; ".join(f"{p['key']}: {p['message']}" for p in problems[:5])
            return _error_result("invalid", f"invalid arguments: {text}", problems)
        call = tool.request(arguments)
        return tool_result(await backend.send(call), call)

    return Server(
        SERVER_NAME,
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
