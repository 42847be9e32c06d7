"""Red team of named tokens (SPEC §21): a viewer tries every write route and every MCP tool that
needs more (both derived from the endpoint declarations, so a new route is tried too), a caller
forges who it is, and no token ever shows in an answer, the log or the audit trail."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from sentinel_hooks.endpoints import ENDPOINTS, Endpoint
from sentinel_hooks.mcp_server.tools import TOOLS
from sentinel_hooks.service import Service
from tests.api.test_roles import ADMIN, OPERATOR, TOKENS, VIEWER, WEBHOOK, bearer
from tests.mcp_server.conftest import body_of
from tests.mcp_server.test_streamable_http import connect
from tests.service.conftest import Starter
from tests.service.test_api import call

WRITES = [e for e in ENDPOINTS if e.role not in (None, "viewer")]
SILENCE = {
    "matchers": [{"path": "watcherId", "op": "eq", "value": "hook"}],
    "durationMs": 60000,
    "comment": "x",
}


async def seeded(start_service: Starter) -> tuple[Service, dict[str, str]]:
    """A service with tokens, a watcher, a callback, an open approval and a silence: every id a
    write route names exists, so a refusal is the role's and not a 404."""
    service = await start_service(watchers={"hook.yaml": WEBHOOK}, server=TOKENS)
    fired = await call(service, "POST", "/api/v1/watchers/hook/fire", body={}, headers=bearer(OPERATOR))
    item = await service.inbox.create("approval", severity="warning", reason="run it?", actor="agent")
    silence = await call(service, "POST", "/api/v1/silences", body=SILENCE, headers=bearer(OPERATOR))
    ids = {
        "watcher": "hook",
        "callback": fired[1]["callbackId"],
        "item": item.id,
        "silence": silence[1]["silence"]["id"],
    }
    return service, ids


def path_of(endpoint: Endpoint, ids: dict[str, str]) -> str:
    kind = "watcher"
    if "/callbacks/" in endpoint.path:
        kind = "callback"
    elif "/inbox/" in endpoint.path or "/approvals/" in endpoint.path:
        kind = "item"
    elif "/silences/" in endpoint.path:
        kind = "silence"
    return endpoint.path.replace("{id}", ids[kind])


async def state(service: Service) -> str:
    """Everything a write could change, as the admin reads it."""
    seen = {}
    for path in (
        "/api/v1/watchers",
        "/api/v1/callbacks",
        "/api/v1/inbox",
        "/api/v1/silences",
        "/api/v1/audit",
    ):
        seen[path] = (await call(service, "GET", path, headers=bearer(ADMIN)))[1]
    return json.dumps(seen, sort_keys=True)


def test_there_are_writes_to_try() -> None:
    assert {"createWatcher", "deleteWatcher", "fireWatcher", "approveInboxItem", "createSilence"} <= {
        e.name for e in WRITES
    }


async def test_a_viewer_changes_nothing_through_any_write_route(start_service: Starter) -> None:
    service, ids = await seeded(start_service)
    before = await state(service)
    for endpoint in WRITES:
        body: Any = {"enabled": False} if endpoint.method == "PATCH" else {}
        if endpoint.path == "/hooks/sentinel":
            body = {"watcher": {"id": "x"}, "payload": {}}
        status, answer = await call(
            service, endpoint.method, path_of(endpoint, ids), body=body, headers=bearer(VIEWER)
        )
        assert (403, "forbidden") == (status, answer["error"]["code"]), endpoint.name
        assert {"role": "viewer", "needed": endpoint.role} == answer["error"]["details"]
    assert before == await state(service)


async def test_a_viewer_is_offered_and_may_call_only_read_tools(start_service: Starter) -> None:
    service, ids = await seeded(start_service)
    before = await state(service)
    reads = {t.name for t in TOOLS if t.endpoint.role == "viewer" and not t.approvals}
    arguments = {"watcherId": ids["watcher"], "itemId": ids["item"], "callbackId": ids["callback"]}
    async with connect(service, bearer(VIEWER)) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        refused = {}
        for tool in TOOLS:
            if tool.endpoint.role == "viewer":
                continue
            result = await client.call_tool(
                tool.name, {k: v for k, v in arguments.items() if k in tool.schema["properties"]}
            )
            refused[tool.name] = (result.is_error, body_of(result)["error"]["code"])
    assert reads == listed
    assert all(r in ((True, "forbidden"), (True, "unknown_tool")) for r in refused.values()), refused
    assert before == await state(service)


async def test_an_operator_is_offered_no_admin_tool(start_service: Starter) -> None:
    service, _ = await seeded(start_service)
    async with connect(service, bearer(OPERATOR)) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
    assert not {"create_watcher", "set_watcher_enabled", "delete_watcher"} & listed
    assert {"fire_watcher", "ack_inbox_item", "add_silence"} <= listed


async def test_a_forged_actor_and_face_stay_claims(start_service: Starter) -> None:
    """An operator who says it is the admin, through Slack, is recorded as itself through the API."""
    service, ids = await seeded(start_service)
    forged = bearer(OPERATOR, **{"X-Sentinel-Actor": "root", "X-Sentinel-Via": "slack"})
    status, answer = await call(
        service, "POST", f"/api/v1/approvals/{ids['item']}/approve", body={}, headers=forged
    )
    assert (200, "alice") == (status, answer["item"]["actor"])
    entry = (await call(service, "GET", "/api/v1/audit?limit=1", headers=bearer(VIEWER)))[1]["items"][0]
    assert ("alice", "root", "api", "approval.approve") == (
        entry["actor"],
        entry["claimedActor"],
        entry["via"],
        entry["action"],
    )


async def test_tokens_never_show_in_answers_logs_or_the_audit(
    start_service: Starter, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    service, ids = await seeded(start_service)
    wrong = "wrong-token-0123456789abcdef"
    answers = [
        await call(service, "GET", "/api/v1/watchers", headers=bearer(wrong)),
        await call(service, "POST", "/api/v1/watchers/hook/fire", body={}, headers=bearer(VIEWER)),
        await call(service, "DELETE", f"/api/v1/silences/{ids['silence']}", headers=bearer(OPERATOR)),
        await call(service, "GET", "/api/v1/audit", headers=bearer(ADMIN)),
        await call(service, "GET", "/api/v1/whoami", headers=bearer(ADMIN)),
    ]
    seen = json.dumps(answers) + caplog.text + json.dumps(answers[3][1])
    for token in (VIEWER, OPERATOR, ADMIN, wrong):
        assert token not in seen
        assert token[:16] not in seen
