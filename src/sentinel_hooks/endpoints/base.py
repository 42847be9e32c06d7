"""What one endpoint of the HTTP API is (``Endpoint``): method, path, parameters, body, answers.

A declaration holds types, not schemas: the query and header parameters are pydantic models (one
field per parameter), a body or an answer is any type pydantic can describe. The faces turn them
into what they need: ``api/`` registers an aiohttp handler per declaration and builds the OpenAPI
document from them, ``mcp_server/`` builds a tool's arguments and request from one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from sentinel_hooks.core.roles import Role

Method = Literal["GET", "POST", "PATCH", "DELETE"]
Auth = Literal["bearer", "open", "page", "metrics", "hmac", "slack"]
"""Who may call: ``bearer`` needs ``server.apiToken``; ``open`` anyone (liveness, readiness);
``page`` anyone (the web page's shell and assets, which hold no data); ``metrics`` the token only
with ``server.metricsAuth``; ``hmac`` the webhook watcher's own credentials, not the API token;
``slack`` Slack's signature made with ``slack.signingSecret`` (the clicking person's role counts).
A ``bearer`` endpoint also names the least ``role`` (SPEC §21) a token needs to call it."""

JSON = "application/json"
PLACEHOLDER = re.compile(r"\{([^{}/]+)\}")


class ApiModel(BaseModel):
    """Base of the API's bodies and answers: camelCase keys, no other keys (and no snake_case
    spelling of them: a body read through one takes only what the document shows)."""

    model_config = ConfigDict(alias_generator=to_camel, extra="forbid")


@dataclass(frozen=True)
class Answer:
    """One documented answer: its status, what it means, and its body's type (None: no body)
    in each of ``media`` (a JSON type unless said otherwise)."""

    status: int
    about: str
    model: Any = None
    media: tuple[str, ...] = (JSON,)


@dataclass(frozen=True)
class Body:
    """A request body: its type, what it is, and whether it may be left out.

    ``max_bytes`` is the most the route reads (413 past it); a body that carries an
    ``observation`` may also be as large as ``limits.maxResponseBytes``; None: the route works
    its limit out (``/mcp``: the largest body a tool sends).
    """

    model: Any
    max_bytes: int | None
    about: str = ""
    required: bool = True
    observation: bool = False
    media: tuple[str, ...] = (JSON,)  # the content types it may come in


@dataclass(frozen=True)
class ProtocolErrors:
    """The errors of a route that speaks a protocol of its own, in that protocol's shape, at
    whatever status it gives (``/mcp``: JSON-RPC errors); documented as the ``default`` answer."""

    about: str
    model: Any


@dataclass(frozen=True)
class PathId:
    """A ``{name}`` segment of the path and what it names."""

    name: str
    about: str


@dataclass(frozen=True, eq=False)
class Endpoint:
    """One route: ``name`` is its OpenAPI operationId; ``answers`` the successful ones first;
    ``errors`` the error statuses the route itself gives in the API's error shape (those its
    ``auth`` and body imply are added by ``error_statuses``), ``protocol_errors`` the others.
    Each is declared once, so one is equal only to itself."""

    name: str
    method: Method
    path: str
    summary: str
    tag: str
    answers: tuple[Answer, ...]
    ids: tuple[PathId, ...] = ()
    query: type[BaseModel] | None = None
    headers: type[BaseModel] | None = None
    body: Body | None = None
    auth: Auth = "bearer"
    role: Role | None = None
    errors: tuple[int, ...] = ()
    protocol_errors: ProtocolErrors | None = None
    any_method: bool = False  # served for every method (heartbeat pings); documented as ``method``

    def __post_init__(self) -> None:
        placeholders = PLACEHOLDER.findall(self.path)
        if placeholders != [i.name for i in self.ids]:
            raise ValueError(f"{self.method} {self.path}: ids {self.ids} do not name {placeholders}")

    @property
    def success(self) -> Answer:
        """The answer of a call that worked (its status is the route's)."""
        return self.answers[0]

    def error_statuses(self) -> tuple[int, ...]:
        """Every error status the route may give in the API's error shape: its own, 421 (the Host
        check) unless open, 401 when it takes credentials, 400/413/415 when it reads a body (unless
        its protocol refuses bodies in its own shape)."""
        codes = set(self.errors)
        if self.auth != "open":
            codes.add(421)
        if self.auth not in ("open", "page"):
            codes.add(401)
        if self.role is not None and self.role != "viewer":
            codes.add(403)
        if self.body is not None and self.protocol_errors is None:
            codes |= {400, 413, 415}
        return tuple(sorted(codes))
