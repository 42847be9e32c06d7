"""``/hooks/ping/{key}[/{suffix}]``: heartbeat pings (SPEC.md §23), any method, no token.

The body (any text, 10 KB at most: 413 beyond) is read before the key is looked up, and the key
is found with the same work whether it is known or not (``watchers.ping_keys``): an unknown key,
a malformed suffix's and a disabled watcher's pings are one 404, so a caller learns nothing about
which keys exist.
"""

from __future__ import annotations

from aiohttp import web

from sentinel_hooks.api.app import service_of
from sentinel_hooks.api.body import read_raw
from sentinel_hooks.api.errors import ApiError
from sentinel_hooks.api.routing import Routes
from sentinel_hooks.endpoints.ping import MAX_PING_BODY, PING, PING_SUFFIX
from sentinel_hooks.watchers.strategies.heartbeat import parse_ping

routes = Routes()

NOT_FOUND = (
    "no enabled heartbeat watcher takes pings to this URL: check the pingKey (and that the suffix is "
    "start, fail or an exit code 0 to 255)"
)


async def ping(request: web.Request) -> web.Response:
    """Record one ping and answer 200 ``{"ok": true, "kind", "fired"}``."""
    service = service_of(request)
    raw = await read_raw(request, max_bytes=MAX_PING_BODY)
    runner = service.manager.by_ping_key(request.match_info["key"])
    parsed = parse_ping(request.match_info.get("suffix"), raw.decode("utf-8", "replace"))
    if runner is None or parsed is None or not runner.enabled:
        raise ApiError(404, "not_found", NOT_FOUND)
    outcome = await runner.heartbeat().ping(parsed)
    return web.json_response({"ok": True, "kind": parsed.kind, "fired": outcome.fired})


routes.serve(PING)(ping)
routes.serve(PING_SUFFIX)(ping)
