"""Inbox and approval routes (SPEC.md §8, §9): list, show, ack, resolve, approve, deny.

Who acted is ``api.access.who_of``: a named token's name, else the ``X-Sentinel-Actor`` header (the
CLI sends ``cli`` or its ``--actor``, the web page ``web``), else ``api``; it is recorded on the item
and in its history. Refused moves are
``Conflict`` (409) and unknown ids ``NotFound`` (404), both rendered by the error middleware.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from aiohttp import web

from sentinel_hooks.api.access import who_of
from sentinel_hooks.api.app import service_of
from sentinel_hooks.api.body import read_json
from sentinel_hooks.api.errors import ApiError
from sentinel_hooks.api.query import limit_param
from sentinel_hooks.api.routing import Routes
from sentinel_hooks.core.roles import Who
from sentinel_hooks.endpoints import inbox as endpoints
from sentinel_hooks.endpoints.inbox import DEFAULT_LIMIT, MAX_BODY, MAX_LIMIT
from sentinel_hooks.endpoints.silences import MAX_DURATION_MS as MAX_SILENCE_MS
from sentinel_hooks.inbox.transitions import INBOX_KINDS, INBOX_STATUSES, MAX_NOTE_CHARS, Action
from sentinel_hooks.store.records import InboxHistoryEntry, InboxItem, InboxKind, InboxStatus

if TYPE_CHECKING:
    from sentinel_hooks.service import Service

routes = Routes()


def item_json(item: InboxItem, escalation: dict[str, Any] | None = None) -> dict[str, Any]:
    """An item in the API's shape (camelCase keys, ISO times), with where its escalation chain is
    (``{policy, step, nextStep, nextAt}``, null without one) when the route looked it up."""
    return {**item.model_dump(mode="json", by_alias=True), "escalation": escalation}


def history_json(entry: InboxHistoryEntry) -> dict[str, Any]:
    """A history entry as ``{at, actor, from, to, note}``."""
    return entry.model_dump(mode="json", by_alias=True)


def _choice(query: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> str | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return None
    if raw not in allowed:
        raise ApiError(
            400,
            f"invalid_{name}",
            f"{name} {raw!r} is not one of {', '.join(allowed)}",
            {"allowed": list(allowed)},
        )
    return raw


def note_of(data: Any) -> str | None:
    """The optional ``note`` of a ``{note?}`` body (``{}`` is fine)."""
    return _note(_shaped(data, {"note"}, 'the body must be {} or {"note": "…"}'))


async def _body(request: web.Request) -> Any:
    """The JSON body, ``{}`` when there is none."""
    return await read_json(request, max_bytes=MAX_BODY) if request.can_read_body else {}


def _shaped(data: Any, keys: set[str], shape: str) -> dict[str, Any]:
    if not isinstance(data, dict) or set(data) - keys:
        raise ApiError(400, "invalid", shape)
    return data


def _note(data: dict[str, Any]) -> str | None:
    note = data.get("note")
    if note is not None and not isinstance(note, str):
        raise ApiError(400, "invalid_note", f"note must be a string, got {type(note).__name__}")
    if note is not None and len(note) > MAX_NOTE_CHARS:
        raise ApiError(
            400, "invalid_note", f"note is {len(note)} characters long; the limit is {MAX_NOTE_CHARS}"
        )
    return note


async def inbox_page(service: Service, query: Mapping[str, str]) -> dict[str, Any]:
    """``{"items", "nextCursor"}`` for the ``status``, ``kind``, ``limit`` and ``cursor`` of ``query``."""
    status = cast("InboxStatus | None", _choice(query, "status", INBOX_STATUSES))
    kind = cast("InboxKind | None", _choice(query, "kind", INBOX_KINDS))
    page = await service.inbox_items(
        status,
        kind,
        limit=limit_param(query, maximum=MAX_LIMIT, default=DEFAULT_LIMIT),
        cursor=query.get("cursor") or None,
    )
    chains = await service.escalation_status(page.items)
    items = [item_json(i, chains.get(i.id)) for i in page.items]
    return {"items": items, "nextCursor": page.next_cursor}


async def move_from(service: Service, action: Action, item_id: str, data: Any, who: Who) -> dict[str, Any]:
    """Resolve, approve or deny the item with a ``{note?}`` body: ``{"item"}``."""
    note = note_of(data)
    moves = {
        "ack": service.ack,
        "resolve": service.resolve,
        "approve": service.approve,
        "deny": service.deny,
    }
    item = await moves[action](item_id, who=who, note=note)
    chain = (await service.escalation_status([item])).get(item.id)
    return {"item": item_json(item, chain)}


async def ack_from(service: Service, item_id: str, data: Any, who: Who) -> dict[str, Any]:
    """Ack the item with a ``{note?, silenceForMs?}`` body: with ``silenceForMs`` the item's
    watcher is silenced that long too (SPEC §14), and the answer carries the ``silence``."""
    data = _shaped(data, {"note", "silenceForMs"}, 'the body must be {} or {"note"?, "silenceForMs"?}')
    note, silence_for = _note(data), data.get("silenceForMs")
    if silence_for is None:
        return {"item": item_json(await service.ack(item_id, who=who, note=note))}
    if (
        isinstance(silence_for, bool)
        or not isinstance(silence_for, int)
        or not 1 <= silence_for <= MAX_SILENCE_MS
    ):
        raise ApiError(
            400, "invalid", f"silenceForMs must be a whole number of milliseconds from 1 to {MAX_SILENCE_MS}"
        )
    item, silence = await service.ack_and_silence(item_id, who=who, note=note, silence_for_ms=silence_for)
    return {"item": item_json(item), "silence": silence.to_json(service.now())}


@routes.serve(endpoints.LIST)
async def list_items(request: web.Request) -> web.Response:
    return web.json_response(await inbox_page(service_of(request), request.query))


@routes.serve(endpoints.SHOW)
async def show_item(request: web.Request) -> web.Response:
    service = service_of(request)
    item, history = await service.inbox_item(request.match_info["id"])
    chain = (await service.escalation_status([item])).get(item.id)
    return web.json_response({"item": item_json(item, chain), "history": [history_json(h) for h in history]})


async def _move(request: web.Request, action: Action) -> web.Response:
    data = await _body(request)
    answer = await move_from(service_of(request), action, request.match_info["id"], data, who_of(request))
    return web.json_response(answer)


@routes.serve(endpoints.ACK)
async def ack_item(request: web.Request) -> web.Response:
    """``{note?, silenceForMs?}`` (``ack_from``)."""
    data = await _body(request)
    answer = await ack_from(service_of(request), request.match_info["id"], data, who_of(request))
    return web.json_response(answer)


@routes.serve(endpoints.RESOLVE)
async def resolve_item(request: web.Request) -> web.Response:
    return await _move(request, "resolve")


@routes.serve(endpoints.APPROVE)
async def approve_item(request: web.Request) -> web.Response:
    return await _move(request, "approve")


@routes.serve(endpoints.DENY)
async def deny_item(request: web.Request) -> web.Response:
    return await _move(request, "deny")
