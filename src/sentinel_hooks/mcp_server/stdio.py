"""Sentinel's MCP tools over stdio (``sentinel mcp``), each message read as the API reads a body.

The SDK's stdio transport reads each line with pydantic, which keeps the last of two values for
one key, takes ``NaN`` and nests without limit, and answers a line it cannot read with nothing.
So every line is read strictly first (``core.strict_json``, the HTTP API's hygiene, SPEC §9):
one it refuses never reaches the SDK, and the client gets a JSON-RPC parse error without an id
whose ``data`` is the API's error ``{code: invalid_json, message, details}`` — what ``/mcp``
answers over HTTP. Blank lines are skipped.

The SDK is given stdin (binary, strictly UTF-8) and keeps stdout, which it diverts while serving
so that stray output cannot corrupt the protocol.
"""

from __future__ import annotations

import math
import sys
from collections.abc import AsyncIterable, AsyncIterator
from typing import TYPE_CHECKING, Any, cast

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from sentinel_hooks.core.roles import Role
from sentinel_hooks.core.strict_json import InvalidJson, loads_strict
from sentinel_hooks.mcp_server.backend import Backend, error_body
from sentinel_hooks.mcp_server.server import build_server

if TYPE_CHECKING:
    from anyio.abc import ObjectSendStream


def parse_error(message: str) -> SessionMessage:
    """The JSON-RPC answer to a line that is not strict JSON."""
    data = error_body("invalid_json", message)["error"]
    error = types.ErrorData(code=types.PARSE_ERROR, message=message, data=data)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=None, error=error))


class CheckedLines:
    """The lines of ``source`` that are strict JSON, as text for the SDK; each other line is
    answered through ``refusals`` instead."""

    def __init__(
        self, source: AsyncIterable[bytes], refusals: MemoryObjectSendStream[SessionMessage]
    ) -> None:
        self._source = source
        self._refusals = refusals

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for raw in self._source:
            if not raw.strip():
                continue
            try:
                loads_strict(raw, what="the message")
            except InvalidJson as exc:
                await self._refusals.send(parse_error(str(exc)))
                continue
            yield raw.decode("utf-8")


async def _forward(
    refusals: MemoryObjectReceiveStream[SessionMessage], write_stream: ObjectSendStream[SessionMessage]
) -> None:
    async with refusals:
        async for message in refusals:
            await write_stream.send(message)


async def serve_stdio(backend: Backend, *, approvals: bool, role: Role | None = None) -> None:
    """Serve the tools on stdin/stdout until the client closes them (only ``role``'s, with one)."""
    server = build_server(backend, approvals=approvals, role=lambda: role)
    send_refusals, refusals = anyio.create_memory_object_stream[SessionMessage](math.inf)
    lines = CheckedLines(anyio.wrap_file(sys.stdin.buffer), send_refusals)
    stdin = cast(Any, lines)  # the SDK only iterates over its stdin, line by line
    async with stdio_server(stdin=stdin) as (read_stream, write_stream), anyio.create_task_group() as tasks:
        tasks.start_soon(_forward, refusals, write_stream)
        await server.run(read_stream, write_stream, server.create_initialization_options())
        tasks.cancel_scope.cancel()
