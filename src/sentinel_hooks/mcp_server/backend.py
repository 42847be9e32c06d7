"""What carries a tool's API call to the service (``Backend``) and what comes back (``Answer``).

Kept apart from the SDK so that importing it (the CLI does, at start-up) loads no MCP code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from sentinel_hooks.mcp_server.tools import ApiCall


@dataclass(frozen=True)
class Answer:
    """What the API answered: a status and its JSON body (None for 204)."""

    status: int
    body: Any


class Backend(Protocol):
    """Carries an ``ApiCall`` to the service and brings back its answer.

    ``sentinel mcp`` sends it over HTTP (``cli/mcp.py``); ``/mcp`` answers it in-process
    (``api/mcp.py``). Errors the API would render are answers (status ≥ 400 with the error body),
    never exceptions.
    """

    async def send(self, call: ApiCall) -> Answer: ...


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    """The API's error shape, ``{"error": {code, message, details}}``."""
    return {"error": {"code": code, "message": message, "details": details}}
