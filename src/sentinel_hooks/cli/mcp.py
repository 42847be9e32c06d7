"""``sentinel mcp``: Sentinel's MCP tools over stdio, for an agent that starts it as a subprocess.

Like the other management commands it talks to the running service's HTTP API (``--url``,
``--token``, ``--actor``, ``-c``), so each tool call is one API request and its result the API's
JSON; each message is read as the API reads a body (``mcp_server.stdio``). Whether
``approve``/``deny`` are offered is the config's ``server.mcpApprovals`` (the
config found as ``-c``, $SENTINEL_CONFIG or ./sentinel.yaml; without one, they are not).
stdout carries the protocol only: every message for people goes to stderr.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import TYPE_CHECKING

import click

from sentinel_hooks.cli.client import Client
from sentinel_hooks.config.location import config_path
from sentinel_hooks.core.roles import ROLES, Role
from sentinel_hooks.errors import SentinelError

if TYPE_CHECKING:
    from sentinel_hooks.mcp_server.backend import Answer
    from sentinel_hooks.mcp_server.tools import ApiCall

DEFAULT_ACTOR = "mcp"


class HttpBackend:
    """Carries each tool's API call to the service over HTTP (the blocking client, in a thread)."""

    def __init__(self, client: Client) -> None:
        self._client = client

    async def send(self, call: ApiCall) -> Answer:
        import asyncio

        from sentinel_hooks.mcp_server.backend import Answer, error_body

        try:
            status, body = await asyncio.to_thread(
                self._client.answer, call.method, call.path_and_query, call.body
            )
        except SentinelError as exc:  # the service is not running, or not at this URL
            return Answer(503, error_body("unreachable", str(exc)))
        return Answer(status, body)


def token_role(client: Client) -> Role | None:
    """The role of the client's token (``GET /api/v1/whoami``), so only its tools are listed;
    None when the service does not say (not running yet: every tool is listed, and the service
    refuses what the role may not do)."""
    try:
        status, body = client.answer("GET", "/api/v1/whoami")
    except SentinelError:
        return None
    role = body.get("role") if status == 200 and isinstance(body, dict) else None
    return role if role in ROLES else None


def approvals_enabled(config: str | None) -> bool:
    """``server.mcpApprovals`` of the config, False without one; a problem in that key (not
    elsewhere in the config) stops the command with the reason."""
    path = config_path(config, os.environ)
    if not path.exists():
        if config is not None:
            raise SentinelError(f"config {config!r} not found")
        return False
    from sentinel_hooks.config.loader import load_server

    return load_server(path.absolute(), os.environ, ("mcpApprovals",)).mcp_approvals


@click.command("mcp")
@click.option(
    "--actor", default=None, help=f"who is acting (recorded in audit trails; default {DEFAULT_ACTOR})"
)
@click.option("--token", default=None, help="API token (default: $SENTINEL_API_TOKEN, else the config)")
@click.option("--url", default=None, help="service URL (default: from the config's server)")
@click.option("--config", "-c", "config", default=None, metavar="FILE", help="sentinel.yaml")
def mcp_command(config: str | None, url: str | None, token: str | None, actor: str | None) -> None:
    """Serve Sentinel's MCP tools over stdio (for Claude Code, Cursor, agent frameworks)."""
    found = Client.from_options(url=url, token=token, config=config, actor=actor or DEFAULT_ACTOR)
    client = dataclasses.replace(found, via="mcp")
    backend = HttpBackend(client)
    approvals = approvals_enabled(config)
    import anyio

    from sentinel_hooks.mcp_server.stdio import serve_stdio  # loaded by this command only (0.5 s)

    role = token_role(client)
    anyio.run(functools.partial(serve_stdio, backend, approvals=approvals, role=role))
