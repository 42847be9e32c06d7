"""Who a request is (SPEC.md §21): its bearer token's name and role, and who acts for a change.

Tokens are compared as SHA-256 digests with ``hmac.compare_digest``, against every configured token
whatever matched, so an unknown token costs the same work as a known one and the time of an answer
says nothing about which token, or how much of one, was right. ``server.apiToken`` is one ``admin``
token named ``admin``; with it alone (no ``server.tokens``) actors stay as SPEC §8 says.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from aiohttp import web

from sentinel_hooks.api.body import has_lone_surrogate
from sentinel_hooks.api.errors import ApiError
from sentinel_hooks.config.service import ServerSpec
from sentinel_hooks.config.tokens import API_TOKEN_NAME
from sentinel_hooks.core.roles import VIAS, Role, Via, Who
from sentinel_hooks.endpoints.common import MAX_ACTOR_CHARS

ACTOR_HEADER = "X-Sentinel-Actor"
VIA_HEADER = (
    "X-Sentinel-Via"  # the face a request says it comes from (the CLI, the web page): api|cli|web|mcp
)


@dataclass(frozen=True)
class Identity:
    """A token's holder: ``named`` when ``server.tokens`` are set (its name is then the actor)."""

    name: str
    role: Role
    named: bool


IDENTITY = web.RequestKey("sentinel_identity", Identity)


def _digest(token: bytes) -> bytes:
    return hashlib.sha256(token).digest()


class Tokens:
    """The configured tokens, as digests, and who holds each."""

    def __init__(self, server: ServerSpec) -> None:
        entries: list[tuple[bytes, Identity]] = []
        if server.api_token is not None:
            entries.append(
                (
                    _digest(server.api_token.get_secret_value().encode()),
                    Identity(API_TOKEN_NAME, "admin", bool(server.tokens)),
                )
            )
        for spec in server.tokens:
            entries.append(
                (_digest(spec.token.get_secret_value().encode()), Identity(spec.name, spec.role, True))
            )
        self._entries = tuple(entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def identify(self, given: str) -> Identity | None:
        """Who holds ``given`` (bytes not UTF-8 come as surrogate escapes: compared as sent), or None.
        Every entry is compared, whichever matched."""
        digest = _digest(given.encode("utf-8", "surrogateescape"))
        found: Identity | None = None
        for expected, identity in self._entries:
            if hmac.compare_digest(digest, expected):
                found = identity
        return found


def _claimed(request: web.Request) -> str | None:
    """The ``X-Sentinel-Actor`` header (trimmed; None when empty); 400 when over 200 characters or
    not UTF-8."""
    actor = request.headers.get(ACTOR_HEADER, "").strip()
    if has_lone_surrogate(actor):
        raise ApiError(400, "invalid_actor", f"{ACTOR_HEADER} is not UTF-8 text")
    if len(actor) > MAX_ACTOR_CHARS:
        raise ApiError(400, "invalid_actor", f"{ACTOR_HEADER} is longer than {MAX_ACTOR_CHARS} characters")
    return actor or None


def via_of(request: web.Request, default: Via = "api") -> Via:
    """The face the request says it comes from (``X-Sentinel-Via``), else ``default``."""
    said = request.headers.get(VIA_HEADER, "")
    for via in VIAS:
        if said == via and via not in ("slack", "source"):
            return via
    return default


def who_of(
    request: web.Request, default: str = "api", claimed: str | None = None, via: Via | None = None
) -> Who:
    """Who acts for ``request``: with a named token its name, what the caller says (``claimed``, else
    the actor header) kept beside it; otherwise what the caller says, else ``default``."""
    face = via or via_of(request, "mcp" if default == "mcp" else "api")
    identity = request.get(IDENTITY)
    who = (
        Who(identity.name, None, face, named=True)
        if identity is not None and identity.named
        else Who(default, None, face)
    )
    return who.claiming(claimed or _claimed(request))
