"""``/mcp`` on the service (SPEC.md §17): the SDK's own client over streamable HTTP, the bearer
token and Host check of the API, results that are the API's JSON, errors as error results."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

import sentinel_hooks
from sentinel_hooks.mcp_server.tools import offered_tools
from sentinel_hooks.service import Service
from tests.mcp_server.conftest import (
    BASE_TOOLS,
    COMMAND_WATCHER,
    NEW_WATCHER,
    TOKEN,
    WEBHOOK,
    body_of,
    server_settings,
)
from tests.service.conftest import Starter
from tests.service.test_api import call

AUTH = {"Authorization": f"Bearer {TOKEN}"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@asynccontextmanager
async def connect(service: Service, headers: dict[str, str] | None = AUTH) -> AsyncIterator[Client]:
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(service.url + "/mcp", http_client=http)) as client,
    ):
        yield client


async def started(start_service: Starter, **settings: Any) -> Service:
    return await start_service(watchers={"hook.yaml": WEBHOOK}, server=server_settings(**settings))


async def test_tools_listed_without_approvals_by_default(start_service: Starter) -> None:
    """approve and deny are not offered unless server.mcpApprovals is true."""
    service = await started(start_service)
    async with connect(service) as client:
        listed = await client.list_tools()
    assert BASE_TOOLS == {tool.name for tool in listed.tools}
    for tool in listed.tools:
        assert tool.description
        assert tool.input_schema["additionalProperties"] is False


async def test_approve_and_deny_offered_with_mcp_approvals(start_service: Starter) -> None:
    """With mcpApprovals: true the agent gets approve and deny, and deny decides an approval."""
    service = await started(start_service, approvals=True)
    item = await service.inbox.create("approval", severity="warning", reason="run rm -rf?", actor="agent")
    async with connect(service) as client:
        listed = await client.list_tools()
        denied = await client.call_tool("deny", {"itemId": item.id, "note": "no"})
    assert BASE_TOOLS | {"approve", "deny"} == {tool.name for tool in listed.tools}
    assert not denied.is_error
    assert ("denied", "mcp") == (body_of(denied)["item"]["status"], body_of(denied)["item"]["actor"])


async def test_approve_refused_when_not_offered(start_service: Starter) -> None:
    """Calling approve without mcpApprovals is an error result saying why; the item stays open."""
    service = await started(start_service)
    item = await service.inbox.create("approval", severity="warning", reason="run it?", actor="agent")
    async with connect(service) as client:
        result = await client.call_tool("approve", {"itemId": item.id})
    assert result.is_error
    assert "mcpApprovals" in body_of(result)["error"]["message"]
    assert "open" == (await service.inbox.get(item.id))[0].status


async def test_create_list_and_fire_a_watcher(start_service: Starter) -> None:
    """create_watcher, list_watchers and fire_watcher answer the API's JSON; the fire is a callback."""
    service = await started(start_service)
    async with connect(service) as client:
        created = await client.call_tool("create_watcher", {"watcher": NEW_WATCHER})
        listed = await client.call_tool("list_watchers", {})
        _status, api_list = await call(service, "GET", "/api/v1/watchers", headers=AUTH)
        fired = await client.call_tool("fire_watcher", {"watcherId": "made-by-mcp", "payload": {"n": 1}})
        callback = await client.call_tool("get_callback", {"callbackId": body_of(fired)["callbackId"]})
    assert not created.is_error
    assert "made-by-mcp" == body_of(created)["watcher"]["id"]
    assert (200, api_list) == (200, body_of(listed))
    assert ["hook", "made-by-mcp"] == [w["id"] for w in body_of(listed)["items"]]
    assert "pending" == body_of(fired)["state"]
    assert "made-by-mcp" == body_of(callback)["callback"]["watcherId"]
    assert {"n": 1} == body_of(callback)["envelope"]["payload"]


async def test_a_created_watchers_secret_is_never_shown(start_service: Starter) -> None:
    """create_watcher with an HMAC secret: its answer, get_watcher and list_watchers show ``***``."""
    service = await started(start_service)
    secret_watcher = NEW_WATCHER | {"secret": "mcp-literal-secret-42"}
    async with connect(service) as client:
        created = body_of(await client.call_tool("create_watcher", {"watcher": secret_watcher}))
        shown = body_of(await client.call_tool("get_watcher", {"watcherId": "made-by-mcp"}))
        listed = body_of(await client.call_tool("list_watchers", {}))
    assert ("***", "***") == (created["watcher"]["secret"], shown["watcher"]["secret"])
    assert "mcp-literal-secret-42" not in json.dumps([created, shown, listed])


async def test_unknown_watcher_is_an_error_result(start_service: Starter) -> None:
    """An unknown id answers the API's 404 JSON as an error result, not a protocol error."""
    service = await started(start_service)
    async with connect(service) as client:
        result = await client.call_tool("get_watcher", {"watcherId": "nope"})
    assert result.is_error
    assert {"code": "not_found", "message": "watcher 'nope' not found", "details": None} == body_of(result)[
        "error"
    ]


async def test_command_watcher_refused(start_service: Starter) -> None:
    """create_watcher refuses command watchers (403 forbidden) unless allowCommandWatchers."""
    service = await started(start_service)
    async with connect(service) as client:
        result = await client.call_tool("create_watcher", {"watcher": COMMAND_WATCHER})
    assert result.is_error
    assert "forbidden" == body_of(result)["error"]["code"]
    assert "probe" not in {r.id for r in service.watchers()}


async def test_invalid_watcher_lists_every_problem(start_service: Starter) -> None:
    """A watcher the API would refuse gets the API's 400 with every key in details."""
    service = await started(start_service)
    async with connect(service) as client:
        result = await client.call_tool(
            "create_watcher", {"watcher": {"id": "x", "strategy": "http-poll", "intervalMs": "2000"}}
        )
    assert result.is_error
    error = body_of(result)["error"]
    assert "invalid" == error["code"]
    assert {"endpoint", "intervalMs"} <= {d["key"] for d in error["details"]}


async def test_arguments_checked_against_the_schema(start_service: Starter) -> None:
    """Arguments outside the tool's schema are an error result naming the argument."""
    service = await started(start_service)
    async with connect(service) as client:
        missing = await client.call_tool("fire_watcher", {})
        extra = await client.call_tool("list_watchers", {"limit": 0, "colour": "red"})
    assert missing.is_error
    assert "invalid" == body_of(missing)["error"]["code"]
    assert "watcherId" in body_of(missing)["error"]["message"]
    keys = {d["key"] for d in body_of(extra)["error"]["details"]}
    assert {"arguments", "limit"} == keys


async def test_inbox_ack(start_service: Starter) -> None:
    """ack_inbox_item acknowledges an item, recorded as acted by mcp; list_inbox shows it."""
    service = await started(start_service)
    item = await service.inbox.create(
        "escalation", severity="critical", reason="disk full", watcher_id="hook"
    )
    async with connect(service) as client:
        acked = await client.call_tool("ack_inbox_item", {"itemId": item.id, "note": "on it"})
        listed = await client.call_tool("list_inbox", {"status": "acked"})
    assert not acked.is_error
    assert ("acked", "mcp") == (body_of(acked)["item"]["status"], body_of(acked)["item"]["actor"])
    assert [item.id] == [i["id"] for i in body_of(listed)["items"]]
    _, history = await service.inbox_item(item.id)
    assert ("mcp", "on it") == (history[-1].actor, history[-1].note)


async def test_the_actor_header_names_who_acted(start_service: Starter) -> None:
    """An agent that says who it is (X-Sentinel-Actor, as for the API) is recorded by that name."""
    service = await started(start_service)
    item = await service.inbox.create(
        "escalation", severity="warning", reason="queue stuck", watcher_id="hook"
    )
    async with connect(service, {**AUTH, "X-Sentinel-Actor": "claude-code (alice)"}) as client:
        acked = await client.call_tool("ack_inbox_item", {"itemId": item.id})
        added = await client.call_tool(
            "add_silence",
            {
                "matchers": [{"path": "watcherId", "op": "eq", "value": "hook"}],
                "durationMs": 60_000,
                "comment": "x",
            },
        )
    assert "claude-code (alice)" == body_of(acked)["item"]["actor"]
    assert "claude-code (alice)" == body_of(added)["silence"]["createdBy"]
    _, history = await service.inbox_item(item.id)
    assert "claude-code (alice)" == history[-1].actor


async def test_add_silence(start_service: Starter) -> None:
    """add_silence makes an active silence (createdBy mcp) that list_silences shows."""
    service = await started(start_service)
    arguments = {
        "matchers": [{"path": "watcherId", "op": "eq", "value": "hook"}],
        "durationMs": 3_600_000,
        "comment": "deploy in progress",
    }
    async with connect(service) as client:
        added = await client.call_tool("add_silence", arguments)
        listed = await client.call_tool("list_silences", {"state": "active"})
    silence = body_of(added)["silence"]
    assert ("active", "mcp") == (silence["state"], silence["createdBy"])
    assert [silence["id"]] == [s["id"] for s in body_of(listed)["items"]]


async def test_add_silence_takes_created_by(start_service: Starter) -> None:
    """add_silence offers createdBy, as the API's body does: it names who silenced."""
    service = await started(start_service)
    arguments = {
        "matchers": [{"path": "watcherId", "op": "eq", "value": "hook"}],
        "durationMs": 60_000,
        "comment": "deploy",
        "createdBy": "claude-code (alice)",
    }
    async with connect(service) as client:
        listed = await client.list_tools()
        added = await client.call_tool("add_silence", arguments)
    schema = next(t.input_schema for t in listed.tools if t.name == "add_silence")
    assert ("string", "claude-code (alice)") == (
        schema["properties"]["createdBy"]["type"],
        body_of(added)["silence"]["createdBy"],
    )


async def test_add_silence_for_an_unknown_watcher_warns(start_service: Starter) -> None:
    """A silence of a watcher id no watcher has is made, and the result's warnings name the id
    (the agent learns of its typo)."""
    service = await started(start_service)
    arguments = {"matchers": [{"path": "watcherId", "op": "eq", "value": "hoook"}], "durationMs": 60_000}
    async with connect(service) as client:
        added = await client.call_tool("add_silence", {**arguments, "comment": "x"})
    body = body_of(added)
    assert (False, "active", True) == (
        added.is_error,
        body["silence"]["state"],
        "no watcher has the id 'hoook'" in body["warnings"][0],
    )


async def test_bad_silence_is_the_api_error(start_service: Starter) -> None:
    """A silence the API refuses (both endsAt and durationMs) is its 400 as an error result."""
    service = await started(start_service)
    arguments = {
        "matchers": [{"path": "watcherId", "op": "eq", "value": "hook"}],
        "durationMs": 1000,
        "endsAt": "2030-01-01T00:00:00Z",
        "comment": "x",
    }
    async with connect(service) as client:
        result = await client.call_tool("add_silence", arguments)
    assert result.is_error
    assert "endsAt: give exactly one of endsAt and durationMs" == body_of(result)["error"]["message"]


async def test_a_silence_ending_past_year_9999_names_the_duration(start_service: Starter) -> None:
    """add_silence starting near the year 9999 with a duration that overflows is the API's 400
    naming durationMs, not an internal error."""
    service = await started(start_service)
    arguments = {
        "matchers": [{"path": "watcherId", "op": "eq", "value": "hook"}],
        "startsAt": "9999-12-31T23:00:00Z",
        "durationMs": 86_400_000,
        "comment": "x",
    }
    async with connect(service) as client:
        result = await client.call_tool("add_silence", arguments)
    error = body_of(result)["error"]
    assert (True, "invalid", ["durationMs"]) == (
        result.is_error,
        error["code"],
        [d["key"] for d in error["details"]],
    )


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token-0123456789", f"Basic {TOKEN}"])
async def test_token_required(start_service: Starter, authorization: str | None) -> None:
    """Without the right bearer token /mcp answers the API's 401 and runs nothing."""
    service = await started(start_service)
    headers = dict(MCP_HEADERS)
    if authorization:
        headers["Authorization"] = authorization
    status, body = await call(service, "POST", "/mcp", body=INITIALIZE, headers=headers)
    assert (401, "unauthorized") == (status, body["error"]["code"])


async def test_sdk_client_without_token_fails(start_service: Starter) -> None:
    """The SDK's client without the token cannot connect."""
    service = await started(start_service)
    with pytest.raises(ExceptionGroup) as caught:
        async with connect(service, headers=None) as client:
            await client.list_tools()
    assert caught.group_contains(MCPError)


async def test_raw_post_with_token_answers_json(start_service: Starter) -> None:
    """With the token a plain JSON-RPC POST gets one JSON answer (stateless, no SSE stream kept);
    the server says its name and the package's version."""
    service = await started(start_service)
    async with (
        aiohttp.ClientSession() as session,
        session.post(service.url + "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **AUTH}) as response,
    ):
        body = await response.json()
        assert (200, "application/json") == (response.status, response.content_type)
    assert {"name": "sentinel", "version": sentinel_hooks.__version__} == body["result"]["serverInfo"]


async def test_host_checked_without_a_token(start_service: Starter) -> None:
    """Without apiToken /mcp answers only loopback Host headers (421 otherwise), as every route."""
    service = await started(start_service, token=False)
    headers = {**MCP_HEADERS, "Host": "evil.example:8765"}
    status, body = await call(service, "POST", "/mcp", body=INITIALIZE, headers=headers)
    assert (421, "misdirected_request") == (status, body["error"]["code"])
    async with connect(service, headers=None) as client:
        assert BASE_TOOLS == {tool.name for tool in (await client.list_tools()).tools}


async def test_stop_with_a_client_connected(start_service: Starter) -> None:
    """The service stops cleanly while an MCP client is still connected (no task left behind)."""
    service = await started(start_service)
    async with connect(service) as client:
        await client.list_tools()
        await service.stop()
    assert [] == [t for t in asyncio.all_tasks() if t.get_name() == "sentinel-mcp"]


SAME_AS_THE_API = [
    ("list_watchers", {"limit": 1}),
    ("list_watchers", {"cursor": "hook"}),
    ("get_watcher", {"watcherId": "hook"}),
    ("get_watcher", {"watcherId": "a/b c"}),
    ("set_watcher_enabled", {"watcherId": "nope", "enabled": False}),
    ("delete_watcher", {"watcherId": "hook"}),
    ("fire_watcher", {"watcherId": "nope", "payload": {"x": 1}}),
    ("create_watcher", {"watcher": {"id": "bad", "strategy": "http-poll"}}),
    ("create_watcher", {"watcher": {**NEW_WATCHER, "endpoint": "${env:HOME}"}}),
    ("create_watcher", {"watcher": COMMAND_WATCHER}),
    ("list_callbacks", {"watcherId": "hook", "state": "pending", "limit": 5}),
    ("list_callbacks", {"cursor": "not-a-cursor"}),
    ("get_callback", {"callbackId": "nope"}),
    ("list_inbox", {"status": "open", "kind": "approval"}),
    ("list_inbox", {"cursor": "not-a-cursor"}),
    ("ack_inbox_item", {"itemId": "nope", "note": "x"}),
    ("resolve_inbox_item", {"itemId": "nope"}),
    ("approve", {"itemId": "nope"}),
    ("deny", {"itemId": "nope", "note": "no"}),
    ("list_silences", {"state": "expired"}),
    (
        "add_silence",
        {"matchers": [{"path": "colour", "op": "eq", "value": 1}], "durationMs": 1, "comment": "x"},
    ),
    (
        "add_silence",
        {"matchers": [{"path": "watcherId", "op": "eq"}], "endsAt": "2001-01-01T00:00:00Z", "comment": "x"},
    ),
]


@pytest.mark.parametrize(("tool", "arguments"), SAME_AS_THE_API, ids=lambda v: str(v)[:40])
async def test_tool_answers_as_the_api(start_service: Starter, tool: str, arguments: dict[str, Any]) -> None:
    """In-process, each tool answers exactly what its API request answers (body, error or not)."""
    service = await started(start_service, approvals=True)
    request = offered_tools(approvals=True)[tool].request(arguments)
    status, expected = await call(
        service, request.method, request.path_and_query, body=request.body, headers=AUTH
    )
    async with connect(service) as client:
        result = await client.call_tool(tool, arguments)
    assert (status >= 400, expected) == (result.is_error, body_of(result))
