"""Watcher routes (SPEC.md §9): list, show, create, enable/disable, delete, manual fire.

Each route parses HTTP and calls a function of the service and the parsed values (``watcher_page``,
``create_from``, …) that checks them and shapes the answer; the MCP tools call the same functions,
so both faces answer with the same JSON and the same errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aiohttp import web
from pydantic import ValidationError

from sentinel_hooks.api.access import who_of
from sentinel_hooks.api.app import service_of
from sentinel_hooks.api.body import read_json
from sentinel_hooks.api.errors import ApiError
from sentinel_hooks.api.query import limit_param
from sentinel_hooks.api.routing import Routes, body_limit
from sentinel_hooks.clock import iso
from sentinel_hooks.config.watcher import CommandWatcher
from sentinel_hooks.core.roles import Who
from sentinel_hooks.endpoints import watchers as endpoints
from sentinel_hooks.endpoints.watchers import DEFAULT_LIMIT, MAX_BODY, MAX_LIMIT, EnabledBody, FireBody
from sentinel_hooks.watchers.runner import WatcherRunner

if TYPE_CHECKING:
    from sentinel_hooks.service import Service

routes = Routes()


async def watcher_json(service: Service, runner: WatcherRunner) -> dict[str, Any]:
    """``{"watcher": definition (secrets redacted), "status": …}``."""
    state = runner.state
    return {
        "watcher": service.watcher_definition(runner),
        "status": service.watcher_status(runner, await service.muting()),
        "runtime": {
            "source": runner.loaded.source.file,
            "lastEventAt": iso(state.last_event_at) if state.last_event_at else None,
            "reconnects": state.reconnects,
            "lastReconnectGapMs": state.last_gap_ms,
            "lastPingBody": runner.deps.redactor.text(state.last_ping_body) if state.last_ping_kind else None,
        },
    }


async def watcher_page(service: Service, query: Mapping[str, str]) -> dict[str, Any]:
    """``{"items", "nextCursor"}`` for the ``limit`` and ``cursor`` of ``query``."""
    limit = limit_param(query, maximum=MAX_LIMIT, default=DEFAULT_LIMIT)
    cursor = query.get("cursor")
    runners = service.watchers()
    if cursor:
        runners = [r for r in runners if r.id > cursor]
    page = runners[:limit]
    muting = await service.muting()
    items = [
        {
            "id": r.id,
            "enabled": r.enabled,
            "strategy": r.spec.strategy_name,
            "tags": list(r.spec.tags),
            "status": service.watcher_status(r, muting),
        }
        for r in page
    ]
    next_cursor = page[-1].id if len(runners) > limit else None
    return {"items": items, "nextCursor": next_cursor}


async def create_from(service: Service, data: Any, who: Who) -> dict[str, Any]:
    """Create the watcher ``data`` describes, checked as a file's; 403 for a ``command`` watcher
    unless ``server.allowCommandWatchers``. The answer of a 201."""
    if not isinstance(data, dict):
        raise ApiError(400, "invalid", "the body must be a JSON object describing one watcher")
    if "${env:" in str(data):
        raise ApiError(
            400, "invalid", "${env:…} references are allowed in watcher files only, not through the API"
        )
    allow_command_watchers = service.settings.server.allow_command_watchers
    if data.get("strategy") == "command" and not allow_command_watchers:
        raise ApiError(
            403,
            "forbidden",
            "command watchers run programs, so they come from files unless "
            "server.allowCommandWatchers is true",
        )
    spec = service.validate_watcher(data)
    if isinstance(spec, CommandWatcher) and not allow_command_watchers:
        raise ApiError(403, "forbidden", "command watchers cannot be created through the API")
    return await watcher_json(service, await service.create_watcher(spec, data, who))


async def set_enabled_from(service: Service, watcher_id: str, data: Any, who: Who) -> dict[str, Any]:
    """Enable or disable from a ``{"enabled": bool}`` body (``EnabledBody``)."""
    try:
        body = EnabledBody.model_validate(data, strict=True)
    except ValidationError:
        raise ApiError(400, "invalid", 'the body must be {"enabled": true} or {"enabled": false}') from None
    return await watcher_json(service, await service.set_watcher_enabled(watcher_id, body.enabled, who))


async def fire_from(service: Service, watcher_id: str, data: Any, who: Who) -> dict[str, Any]:
    """A manual fire from a ``{}`` or ``{"payload": …}`` body (``FireBody``); the answer of a 202."""
    runner = service.watcher(watcher_id)
    try:
        body = FireBody.model_validate(data, strict=True)
    except ValidationError:
        raise ApiError(400, "invalid", 'the body must be {} or {"payload": …}') from None
    outcome = await service.fire(runner.id, body.payload, who)
    if outcome.contract is None:
        raise ApiError(
            400, "fire_failed", outcome.state.last_error or f"the fire was not sent ({outcome.skipped})"
        )
    return {"callbackId": outcome.contract.callback_id, "state": outcome.contract.state}


@routes.serve(endpoints.LIST)
async def list_watchers(request: web.Request) -> web.Response:
    return web.json_response(await watcher_page(service_of(request), request.query))


@routes.serve(endpoints.SHOW)
async def show_watcher(request: web.Request) -> web.Response:
    service = service_of(request)
    return web.json_response(await watcher_json(service, service.watcher(request.match_info["id"])))


@routes.serve(endpoints.CREATE)
async def create_watcher(request: web.Request) -> web.Response:
    data = await read_json(request, max_bytes=MAX_BODY)
    return web.json_response(await create_from(service_of(request), data, who_of(request)), status=201)


@routes.serve(endpoints.PATCH)
async def patch_watcher(request: web.Request) -> web.Response:
    data = await read_json(request, max_bytes=MAX_BODY)
    return web.json_response(
        await set_enabled_from(service_of(request), request.match_info["id"], data, who_of(request))
    )


@routes.serve(endpoints.DELETE)
async def delete_watcher(request: web.Request) -> web.Response:
    await service_of(request).delete_watcher(request.match_info["id"], who_of(request))
    return web.Response(status=204)


@routes.serve(endpoints.FIRE)
async def fire_watcher(request: web.Request) -> web.Response:
    service = service_of(request)
    service.watcher(request.match_info["id"])  # 404 before reading the body
    data: Any = {}
    if request.can_read_body:
        data = await read_json(request, max_bytes=body_limit(endpoints.FIRE, service))
    return web.json_response(
        await fire_from(service, request.match_info["id"], data, who_of(request)), status=202
    )
