"""Connections to the MCP servers of ``mcpServers`` (SPEC.md §17): started once, shared, stopped once.

Every hook session of the process shares one connection per server (the MCP session carries
concurrent requests). Each connection is held by an owner task, because the SDK's client is a
stack of anyio task groups that must be entered and left by the same task: the owner connects,
lists the server's tools, then waits until it is told to close; sessions call tools through
the connected client from their own tasks.

Connections are opened at service start, in the background (a slow server delays nobody), and
again on first use after a failure, at most once per ``RETRY_S``. A server that cannot start,
does not answer within its ``timeoutMs`` or breaks mid-call is never an exception for the
caller: ``call`` answers ``McpUnavailable`` and the connection's ``status`` says why (shown by
``sentinel status`` and ``/readyz``). Error texts are masked with the service's redactor: a
server's command line, URL or error may hold a secret from the environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from sentinel_hooks.clock import Clock, iso
from sentinel_hooks.config.mcp import McpServerSpec, StdioMcpServer, UrlMcpServer
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.net.guard import guarded
from sentinel_hooks.net.policy import HostPolicy

log = logging.getLogger(__name__)

CONNECTION_CLOSED = -32000  # JSON-RPC codes the SDK raises as MCPError when no answer can come
REQUEST_TIMEOUT = -32001
RETRY_S = 10.0  # a failed server is tried again on use, at most this often
MAX_TOOL_PAGES = 20  # tools/list pages read from one server
STOP_S = 5.0  # how long a stop waits for a connection to close before cancelling its owner

McpState = Literal["starting", "ready", "failed", "stopped"]


class McpUnavailable(Exception):
    """The server could not be reached, started, or answer; the message is for the model."""


class McpCallError(Exception):
    """The server answered the call with a protocol error (unknown tool, bad arguments)."""


@dataclass(frozen=True)
class ListedTool:
    """A tool as the server lists it: its name, description and JSON Schema, as given."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class CallOutcome:
    """A tool's answer: its text content (blocks joined), and whether the tool reported an error."""

    text: str
    is_error: bool


def _reason(exc: BaseException) -> str:
    """One line for an exception, looking inside exception groups (anyio's task groups raise them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class McpConnection:
    """One configured server: its owner task, its client while connected, and its status."""

    def __init__(
        self,
        name: str,
        spec: McpServerSpec,
        *,
        base_dir: Path,
        redactor: Redactor,
        clock: Clock,
        retry_s: float = RETRY_S,
        policy: HostPolicy | None = None,
    ):
        self.name = name
        self._retry_s = retry_s
        self._policy = policy
        self.spec = spec
        self._base_dir = base_dir
        self._redactor = redactor
        self._clock = clock
        self._client: Any = None
        self._owner: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()
        self._attempted_at: float = -math.inf
        self.state: McpState = "stopped"
        self.error: str | None = None
        self.since: datetime | None = None
        self.tools: list[ListedTool] = []  # the last listing that succeeded (kept across failures)

    @property
    def transport(self) -> str:
        return "stdio" if isinstance(self.spec, StdioMcpServer) else "http"

    @property
    def timeout_s(self) -> float:
        return self.spec.timeout_ms / 1000

    def status(self) -> dict[str, Any]:
        """What ``sentinel status`` shows: transport, state, since when, why (failed) and tool count."""
        return {
            "transport": self.transport,
            "state": self.state,
            "since": iso(self.since) if self.since else None,
            "error": self.error,
            "tools": len(self.tools),
        }

    def connect(self) -> None:
        """Start the owner task (unless one runs); it connects and lists the tools."""
        if self._owner is not None and not self._owner.done():
            return
        self._attempted_at = asyncio.get_running_loop().time()
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()
        self._set("starting", None)
        self._owner = asyncio.get_running_loop().create_task(self._own(), name=f"mcp:{self.name}")

    async def ready(self) -> bool:
        """Wait (up to the server's timeout) for the connection; reconnect a failed one when due."""
        if self.state == "failed" and asyncio.get_running_loop().time() - self._attempted_at >= self._retry_s:
            self.connect()
        if self.state == "starting":
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ready.wait(), self.timeout_s + 1)
        return self.state == "ready" and self._client is not None

    async def call(self, tool: str, arguments: dict[str, Any]) -> CallOutcome:
        """Call ``tool``; ``McpUnavailable`` when the server cannot answer, ``McpCallError`` when it
        answers with an error (the connection stays up then)."""
        from mcp import MCPError

        if not await self.ready():
            raise McpUnavailable(f"MCP server {self.name!r} is not available: {self.error or self.state}")
        client = self._client
        try:
            result = await asyncio.wait_for(
                client.call_tool(tool, arguments, read_timeout_seconds=self.timeout_s), self.timeout_s + 5
            )
        except MCPError as exc:
            if exc.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
                raise McpCallError(self._redactor.text(f"MCP server {self.name!r}: {exc}")) from None
            reason = self._redactor.text(str(exc) or "connection closed")
            if exc.code == REQUEST_TIMEOUT:
                reason = f"no answer within {self.timeout_s:g} s (timeoutMs)"
            self._broken(reason)
            raise McpUnavailable(f"MCP server {self.name!r} did not answer: {reason}") from None
        except Exception as exc:  # the connection is broken (process gone, stream closed, no answer)
            reason = self._redactor.text(_reason(exc))
            if isinstance(exc, TimeoutError):
                reason = f"no answer within {self.timeout_s:g} s (timeoutMs)"
            self._broken(reason)
            raise McpUnavailable(f"MCP server {self.name!r} did not answer: {reason}") from None
        return CallOutcome(text=_text_of(result), is_error=bool(result.is_error))

    async def stop(self) -> None:
        """Close the connection (a stdio server's process ends with it) and wait for the owner."""
        owner, self._owner = self._owner, None
        self._closing.set()
        if owner is not None:
            try:
                await asyncio.wait_for(asyncio.shield(owner), STOP_S)
            except TimeoutError:
                owner.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await owner
            except Exception:  # the owner records its own failures
                pass
        self._client = None
        self._set("stopped", None)

    def _broken(self, reason: str) -> None:
        if self.state == "ready":
            log.warning("MCP server %s failed: %s", self.name, reason)
            self._set("failed", reason)
            self._client = None
            self._closing.set()

    def _set(self, state: McpState, error: str | None) -> None:
        if state != self.state or error != self.error:
            self.since = self._clock.now()
        self.state, self.error = state, error

    async def _own(self) -> None:
        """Connect, list tools, publish the client, wait to be closed; record why it ended.

        Touches only its own generation's events and client: after a failure a new owner may
        already run while this one is still closing.
        """
        import anyio

        closing, ready = self._closing, self._ready
        mine: Any = None
        try:
            with anyio.CancelScope() as scope:
                scope.deadline = anyio.current_time() + self.timeout_s
                async with self._open() as client:
                    tools = await _list_tools(client)
                    scope.deadline = math.inf
                    mine = client
                    self.tools = tools
                    self._client = client
                    self._set("ready", None)
                    ready.set()
                    log.info("MCP server %s ready with %d tool(s)", self.name, len(tools))
                    await closing.wait()
            if scope.cancelled_caught:
                self._fail(f"did not answer within {self.timeout_s:g} s (timeoutMs)", closing)
        except Exception as exc:
            self._fail(self._redactor.text(_reason(exc)), closing)
        finally:
            if mine is not None and self._client is mine:
                self._client = None
            ready.set()

    def _fail(self, reason: str, closing: asyncio.Event) -> None:
        """The connection ended without being asked to (asked: ``stop``/``_broken`` set the state)."""
        if not closing.is_set():
            log.warning("MCP server %s failed: %s", self.name, reason)
            self._set("failed", reason)

    @contextlib.asynccontextmanager
    async def _open(self) -> AsyncIterator[Any]:
        """The SDK client for this server, entered (stdio child or streamable HTTP)."""
        from mcp import Client, StdioServerParameters
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        spec = self.spec
        async with contextlib.AsyncExitStack() as stack:
            if isinstance(spec, StdioMcpServer):
                params = StdioServerParameters(
                    command=spec.command[0], args=spec.command[1:], env=dict(spec.env), cwd=self._base_dir
                )
                client = Client(params, read_timeout_seconds=self.timeout_s, cache=None)
            else:
                assert isinstance(spec, UrlMcpServer)
                if self._policy is not None:
                    # the SDK connects with its own HTTP client, not SafeHttp: the guard applies the
                    # host policy to every address it resolves and connects to (private networks
                    # too), in this owner task and the transport's tasks, which copy its context
                    stack.enter_context(guarded(self._policy))
                http = await stack.enter_async_context(create_mcp_http_client(headers=dict(spec.headers)))
                transport = streamable_http_client(spec.url, http_client=http)
                client = Client(transport, read_timeout_seconds=self.timeout_s, cache=None)
            yield await stack.enter_async_context(client)


async def _list_tools(client: Any) -> list[ListedTool]:
    found: list[ListedTool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor)
        found.extend(
            ListedTool(tool.name, tool.description or "", dict(tool.input_schema)) for tool in page.tools
        )
        cursor = page.next_cursor
        if cursor is None:
            break
    return found


def _text_of(result: Any) -> str:
    """The text of a CallToolResult: its text blocks joined, other blocks named, else its
    structured content as JSON."""
    import json

    parts: list[str] = []
    for block in result.content:
        text = getattr(block, "text", None)
        kind = getattr(block, "type", "non-text")
        parts.append(text if isinstance(text, str) else f"[{kind} content omitted]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return "\n".join(parts)


class McpServers:
    """Every configured server's connection: started with the service, stopped with it."""

    def __init__(
        self,
        specs: Mapping[str, McpServerSpec],
        *,
        base_dir: Path,
        redactor: Redactor,
        clock: Clock,
        retry_s: float = RETRY_S,
        policy: HostPolicy | None = None,
    ) -> None:
        """``policy`` is the service's host policy, applied to URL servers' connections."""
        self.connections = {
            name: McpConnection(
                name,
                spec,
                base_dir=base_dir,
                redactor=redactor,
                clock=clock,
                retry_s=retry_s,
                policy=policy,
            )
            for name, spec in specs.items()
        }

    def start(self) -> None:
        """Connect to every server in the background."""
        for connection in self.connections.values():
            connection.connect()

    async def stop(self) -> None:
        await asyncio.gather(*(c.stop() for c in self.connections.values()))

    def status(self) -> dict[str, dict[str, Any]]:
        return {name: c.status() for name, c in self.connections.items()}
