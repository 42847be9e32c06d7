"""Silence routes (SPEC.md §14): list, show, create, expire; and ``GET /api/v1/status``.

A silence made here applies to this replica's next fire at once and to other replicas' within a
second (``callbacks.intake.silences``). ``createdBy`` is the body's ``createdBy`` (as Alertmanager's clients
send it), else the ``X-Sentinel-Actor`` header, else ``api`` (``/mcp``: ``mcp``).
Every bad body is a 400 naming the key: an unknown matcher path or operator, a time that is not
ISO 8601 with a timezone, both or neither of ``endsAt`` and ``durationMs``, an end in the past.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast, get_args

from aiohttp import web
from pydantic import TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from sentinel_hooks.api.access import who_of
from sentinel_hooks.api.app import service_of
from sentinel_hooks.api.body import read_json
from sentinel_hooks.api.errors import ApiError
from sentinel_hooks.api.query import limit_param
from sentinel_hooks.api.routing import Routes
from sentinel_hooks.clock import iso
from sentinel_hooks.config.hints import did_you_mean
from sentinel_hooks.core.checks import MatchMode
from sentinel_hooks.core.conditions import Op
from sentinel_hooks.core.roles import Who
from sentinel_hooks.core.silences import Matcher
from sentinel_hooks.endpoints import service as service_endpoints
from sentinel_hooks.endpoints import silences as endpoints
from sentinel_hooks.endpoints.common import MAX_ACTOR_CHARS
from sentinel_hooks.endpoints.silences import DEFAULT_LIMIT, MAX_BODY, MAX_DURATION_MS, MAX_LIMIT
from sentinel_hooks.errors import NotFound
from sentinel_hooks.store.silences import (
    MAX_COMMENT_CHARS,
    MAX_MATCHERS,
    SILENCE_STATES,
    Silence,
)

if TYPE_CHECKING:
    from sentinel_hooks.service import Service

routes = Routes()

LAST_TIME = "9999-12-31T23:59:59.999Z"  # datetime's last instant: times past it cannot be held
BODY_KEYS = frozenset({"matchers", "match", "startsAt", "endsAt", "durationMs", "comment", "createdBy"})
_MATCHERS: TypeAdapter[list[Matcher]] = TypeAdapter(list[Matcher])


def silence_json(request: web.Request, silence: Silence) -> dict[str, Any]:
    """A silence in the API's shape, with its state now."""
    return silence.to_json(service_of(request).now())


async def silence_page(service: Service, query: Mapping[str, str]) -> dict[str, Any]:
    """``{"items", "nextCursor"}`` for the ``state``, ``limit`` and ``cursor`` of ``query``."""
    raw = query.get("state") or None
    if raw is not None and raw not in SILENCE_STATES:
        raise ApiError(
            400,
            "invalid_state",
            f"state {raw!r} is not one of {', '.join(SILENCE_STATES)}",
            {"allowed": list(SILENCE_STATES)},
        )
    page = await service.silence_page(
        raw,
        limit=limit_param(query, maximum=MAX_LIMIT, default=DEFAULT_LIMIT),
        cursor=query.get("cursor") or None,
    )
    now = service.now()
    return {"items": [s.to_json(now) for s in page.items], "nextCursor": page.next_cursor}


async def create_from(service: Service, data: Any, who: Who) -> dict[str, Any]:
    """A new silence from a POST body: ``{"silence"}``, the answer of a 201. The body's
    ``createdBy`` names who made it (SPEC §14: without ``server.tokens`` it is the actor, with
    them it is kept as ``claimedActor``), else ``who`` (the request's)."""
    arguments = parse_body(data, service.now())  # data is an object with known keys from here on
    silence = await service.create_silence(**arguments, who=who.claiming(_created_by(data)))
    answer: dict[str, Any] = {"silence": silence.to_json(service.now())}
    warnings = unknown_watchers(service, arguments["matchers"])
    if warnings:
        answer["warnings"] = warnings
    return answer


def unknown_watchers(service: Service, matchers: list[Matcher]) -> list[str]:
    """A warning per id a ``watcherId`` matcher (``eq``, ``in``) names and no watcher has.

    Accepted, not refused (SPEC §14 does not ask that the watcher exist): the id may be a watcher
    created later or the ``watcher.id`` of envelopes POSTed to /hooks/sentinel. But it is more
    often a typo, and a silence that mutes nothing should not pass without a word.
    """
    warnings = []
    for index, matcher in enumerate(matchers):
        if matcher.path != "watcherId" or matcher.op not in ("eq", "in"):
            continue
        ids = matcher.value if matcher.op == "in" else [matcher.value]
        for watcher_id in ids:
            try:
                service.watcher(str(watcher_id))
            except NotFound:
                warnings.append(
                    f"matchers.{index}: no watcher has the id {watcher_id!r} (a typo?): this silence "
                    "mutes only a watcher created later with that id, or envelopes POSTed to "
                    "/hooks/sentinel that name it"
                )
    return warnings


def _invalid(key: str, message: str) -> ApiError:
    return ApiError(400, "invalid", f"{key}: {message}", [{"key": key, "message": message}])


def parse_matchers(value: Any, key: str = "matchers") -> list[Matcher]:
    """``[{path, op, value}]``: 1 to 25 matchers with known paths and operators, else 400."""
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_MATCHERS:
        raise _invalid(key, f"give 1 to {MAX_MATCHERS} matchers [{{path, op, value}}]")
    try:
        return _MATCHERS.validate_python(value)
    except ValidationError as exc:
        details = [
            {"key": ".".join([key, *(str(p) for p in e["loc"])]), "message": _error_text(e)}
            for e in exc.errors()
        ]
        message = "; ".join(f"{d['key']}: {d['message']}" for d in details)
        raise ApiError(400, "invalid", message, details) from None


def _error_text(error: ErrorDetails) -> str:
    """A matcher's validation error for people (an unknown operator with a "did you mean")."""
    if error["type"] == "literal_error":
        ops = [op for op in get_args(Op) if op != "changed"]
        given = str(error.get("input"))
        return f"{given!r} is not one of {', '.join(ops)}{did_you_mean(given, ops)}"
    return error["msg"].removeprefix("Value error, ")


def _instant(value: Any, key: str) -> datetime:
    if not isinstance(value, str):
        raise _invalid(key, "must be an ISO 8601 time with a timezone, e.g. 2026-01-01T02:00:00Z")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise _invalid(key, f"{value!r} is not an ISO 8601 time (e.g. 2026-01-01T02:00:00Z)") from None
    if parsed.tzinfo is None:
        raise _invalid(key, f"{value!r} has no timezone; add Z or an offset such as +02:00")
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:00:00-05:00 is in the year 10000 in UTC
        raise _invalid(key, f"{value!r} is outside 0001-01-01T00:00:00Z to {LAST_TIME} once in UTC") from None


def _created_by(data: dict[str, Any]) -> str | None:
    """The body's ``createdBy``, trimmed; None when absent (null is not a name)."""
    if "createdBy" not in data:
        return None
    value = data["createdBy"]
    if not isinstance(value, str) or not value.strip() or len(value.strip()) > MAX_ACTOR_CHARS:
        raise _invalid("createdBy", f"must name who silences, in 1 to {MAX_ACTOR_CHARS} characters")
    return value.strip()


def _duration_ms(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DURATION_MS:
        raise _invalid("durationMs", f"must be a whole number of milliseconds from 1 to {MAX_DURATION_MS}")
    return value


def parse_body(data: Any, now: datetime) -> dict[str, Any]:
    """The keyword arguments of ``create_silence`` from a POST body (400 for anything wrong)."""
    if not isinstance(data, dict):
        raise ApiError(
            400, "invalid", "the body must be a JSON object {matchers, endsAt | durationMs, comment}"
        )
    unknown = sorted(set(data) - BODY_KEYS)
    if unknown:
        raise _invalid(unknown[0], f"unknown key; use {', '.join(sorted(BODY_KEYS))}")
    matchers = parse_matchers(data.get("matchers"))
    match = data.get("match", "all")
    if match not in ("all", "any"):
        raise _invalid("match", f"{match!r} is not one of all, any")
    comment = data.get("comment")
    if not isinstance(comment, str) or not comment.strip() or len(comment) > MAX_COMMENT_CHARS:
        raise _invalid("comment", f"say why, in 1 to {MAX_COMMENT_CHARS} characters")
    starts_at = _instant(data["startsAt"], "startsAt") if data.get("startsAt") is not None else None
    if ("endsAt" in data) == ("durationMs" in data):
        raise _invalid("endsAt", "give exactly one of endsAt and durationMs")
    start = starts_at or now
    if "endsAt" in data:
        ends_at = _instant(data["endsAt"], "endsAt")
    else:
        duration_ms = _duration_ms(data["durationMs"])
        try:
            ends_at = start + timedelta(milliseconds=duration_ms)
        except OverflowError:
            raise _invalid(
                "durationMs",
                f"{duration_ms} ms after {iso(start)} ends past {LAST_TIME}, the last time a silence "
                "can hold: give an earlier startsAt or a shorter duration",
            ) from None
    if ends_at <= start:
        raise _invalid("endsAt", "must be after startsAt (or now)")
    if ends_at <= now:
        raise _invalid("endsAt", "is in the past: the silence would never apply")
    if ends_at - start > timedelta(milliseconds=MAX_DURATION_MS):
        raise _invalid("endsAt", "a silence lasts at most a year and a day")
    return {
        "matchers": matchers,
        "match": cast("MatchMode", match),
        "starts_at": starts_at,
        "ends_at": ends_at,
        "comment": comment.strip(),
    }


@routes.serve(endpoints.LIST)
async def list_silences(request: web.Request) -> web.Response:
    return web.json_response(await silence_page(service_of(request), request.query))


@routes.serve(endpoints.CREATE)
async def create_silence(request: web.Request) -> web.Response:
    who = who_of(request)
    data = await read_json(request, max_bytes=MAX_BODY)
    return web.json_response(await create_from(service_of(request), data, who), status=201)


@routes.serve(endpoints.SHOW)
async def show_silence(request: web.Request) -> web.Response:
    silence = await service_of(request).silence(request.match_info["id"])
    return web.json_response({"silence": silence_json(request, silence)})


@routes.serve(endpoints.EXPIRE)
async def expire_silence(request: web.Request) -> web.Response:
    silence = await service_of(request).expire_silence(request.match_info["id"], who_of(request))
    return web.json_response({"silence": silence_json(request, silence)})


@routes.serve(service_endpoints.STATUS)
async def status(request: web.Request) -> web.Response:
    return web.json_response(await service_of(request).status())
