"""``mcpServers`` in sentinel.yaml and a watcher's ``fire.tools`` (SPEC.md §17, second part).

An MCP server is started as a command (stdio) or reached by URL (streamable HTTP). Commands
come only from sentinel.yaml, never from a watcher, so nothing an API client writes can start a
program. URL servers' hosts are checked against allowedHosts at load (``crosscheck.py``), as
targets are. Server names become the prefix of the tool names the model sees
(``server__tool``), so they are limited to what every model API accepts in a tool name.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import Discriminator, Field, Tag, field_validator

from sentinel_hooks.config.base import PositiveMs, Spec

ServerName = Annotated[str, Field(min_length=1, max_length=32, pattern=r"^[A-Za-z0-9-]+$")]
"""Letters, digits and ``-``: with ``__`` and the tool's name it must stay a valid tool name."""

TOOL_SEPARATOR = "__"


class StdioMcpServer(Spec):
    """A server started as a child process, spoken to over its stdin and stdout."""

    command: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    timeout_ms: PositiveMs = 30000
    read_only: bool = False  # its tools change nothing: a dry run (replay, eval) may call them


class UrlMcpServer(Spec):
    """A server reached over streamable HTTP."""

    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_ms: PositiveMs = 30000
    read_only: bool = False  # its tools change nothing: a dry run (replay, eval) may call them

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url!r} is not an http(s) URL with a host, e.g. http://127.0.0.1:8811/mcp")
        return url


def _transport(data: Any) -> str | None:
    if isinstance(data, dict):
        if "command" in data:
            return "command"
        if "url" in data:
            return "url"
        return None
    if isinstance(data, StdioMcpServer):
        return "command"
    return "url" if isinstance(data, UrlMcpServer) else None


McpServerSpec = Annotated[
    Annotated[StdioMcpServer, Tag("command")] | Annotated[UrlMcpServer, Tag("url")],
    Discriminator(
        _transport,
        custom_error_type="mcp_server",
        custom_error_message="an MCP server needs either command: [program, args…] or url: http(s)://…",
    ),
]


def check_tool_pattern(pattern: str) -> str:
    """A ``fire.tools`` entry: ``server.tool``, the tool part may use ``*`` and ``?`` globs."""
    server, dot, tool = pattern.partition(".")
    if not dot or not server or not tool:
        raise ValueError(f'{pattern!r} is not server.tool; write e.g. "grafana.*" or "k8s.list_pods"')
    if any(c in server for c in "*?["):
        raise ValueError(f"{pattern!r}: the server part names one server (globs apply to the tool part)")
    return pattern


def pattern_server(pattern: str) -> str:
    """The server a ``fire.tools`` pattern names."""
    return pattern.partition(".")[0]
