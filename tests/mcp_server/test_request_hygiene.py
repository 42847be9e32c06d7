"""``/mcp`` gets the API's request hygiene (SPEC.md §9, §17): a body the API would refuse is
refused before the MCP SDK reads it, and a tool's arguments are capped as its route's body is."""

from __future__ import annotations

import json
import math
from typing import Any

import aiohttp
import pytest
from mcp.shared.exceptions import MCPError

from sentinel_hooks.api.routes.callbacks import callback_page
from sentinel_hooks.api.routes.watchers import MAX_BODY as WATCHER_MAX_BODY
from sentinel_hooks.service import Service
from tests.mcp_server.conftest import NEW_WATCHER, body_of
from tests.mcp_server.test_streamable_http import AUTH, MCP_HEADERS, connect, started
from tests.service.conftest import Starter

HEADERS = {**MCP_HEADERS, **AUTH, "MCP-Protocol-Version": "2025-06-18"}
FIRE = '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "fire_watcher", '
FIRE += '"arguments": {"watcherId": "hook", "payload": %s}}}'


async def post(service: Service, raw: bytes) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(service.url + "/mcp", data=raw, headers=HEADERS) as response,
    ):
        return response.status, await response.json()


def leaves(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    """The exceptions of nested exception groups."""
    found: list[BaseException] = []
    for error in group.exceptions:
        found.extend(leaves(error) if isinstance(error, BaseExceptionGroup) else [error])
    return found


async def callbacks(service: Service) -> list[Any]:
    page: dict[str, Any] = await callback_page(service, {})
    return page["items"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("payload", "said"),
    [
        ('{"level": NaN}', "NaN is not a JSON number"),
        ('{"level": -Infinity}', "-Infinity is not a JSON number"),
        ('{"level": "crit", "level": "ok"}', "duplicate key 'level'"),
        ("[" * 101 + "]" * 101, "nested deeper than 100"),
        ('{"level": "\\ud800"}', "lone surrogate (\\ud800)"),
        ('{"n": 0.' + "1" * 4300 + "}", "more than 4300 digits"),
    ],
    ids=["nan", "infinity", "duplicate-key", "too-deep", "lone-surrogate", "long-number"],
)
async def test_a_body_the_api_refuses_is_refused(start_service: Starter, payload: str, said: str) -> None:
    """400 before any tool runs (no fire), as a JSON-RPC parse error carrying the API's error
    {code: invalid_json, message, details} as data; the message says what is wrong."""
    service = await started(start_service)
    status, body = await post(service, (FIRE % payload).encode())
    error = body["error"]
    assert (400, None, -32700, "invalid_json", True, error["message"], []) == (
        status,
        body["id"],
        error["code"],
        error["data"]["code"],
        said in error["message"],
        error["data"]["message"],
        await callbacks(service),
    ), body


async def test_a_condition_compared_with_nan_is_refused(start_service: Starter) -> None:
    """create_watcher with a condition `eq NaN` is a 400 saying NaN is not JSON (it was stored
    as null, or a 500 when stored); no watcher is made."""
    service = await started(start_service)
    watcher = {**NEW_WATCHER, "conditions": [{"path": "level", "op": "eq", "value": math.nan}]}
    call = {"name": "create_watcher", "arguments": {"watcher": watcher}}
    raw = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call})
    status, body = await post(service, raw.encode())
    assert (400, True, ["hook"]) == (
        status,
        "NaN is not a JSON number" in body["error"]["message"],
        [runner.id for runner in service.watchers()],
    ), body


async def test_a_definition_larger_than_its_route_takes_is_an_error_result(start_service: Starter) -> None:
    """create_watcher with a definition over the route's 256 KiB (but within the request cap) is
    the API's 413 as an error result, through the SDK's client; nothing is made."""
    service = await started(start_service)
    values = ["x" * 100] * 2_530
    watcher = {**NEW_WATCHER, "conditions": [{"path": "level", "op": "in", "value": values}]}
    assert WATCHER_MAX_BODY < len(json.dumps(watcher)) < WATCHER_MAX_BODY + 8 * 1024
    async with connect(service) as client:
        result = await client.call_tool("create_watcher", {"watcher": watcher})
    error = body_of(result)["error"]
    assert (True, "payload_too_large", True, ["hook"]) == (
        result.is_error,
        error["code"],
        str(WATCHER_MAX_BODY) in error["message"],
        [runner.id for runner in service.watchers()],
    )


async def test_a_743_kb_definition_is_refused_saying_why(start_service: Starter) -> None:
    """A request past the largest tool body plus framing is refused before it is parsed; the
    SDK's client shows the agent why (a JSON-RPC error message), and nothing is made."""
    service = await started(start_service)
    values = ["x" * 100] * 7_000
    watcher = {**NEW_WATCHER, "conditions": [{"path": "level", "op": "in", "value": values}]}
    assert len(json.dumps(watcher)) > 700_000
    with pytest.raises(ExceptionGroup) as caught:
        async with connect(service) as client:
            await client.call_tool("create_watcher", {"watcher": watcher})
    said = [str(error) for error in leaves(caught.value) if isinstance(error, MCPError)]
    assert (True, ["hook"]) == (
        "the MCP request is larger than" in said[0],
        [r.id for r in service.watchers()],
    )


async def test_a_request_larger_than_any_tool_takes_is_413(start_service: Starter) -> None:
    """A request past the largest tool body plus framing is 413 before it is parsed."""
    service = await started(start_service)
    payload = json.dumps({"blob": "x" * (WATCHER_MAX_BODY + 64 * 1024)})
    status, body = await post(service, (FIRE % payload).encode())
    assert (413, "payload_too_large", []) == (status, body["error"]["data"]["code"], await callbacks(service))


async def test_a_body_not_labelled_json_is_415(start_service: Starter) -> None:
    """As for the API, a body not labelled JSON is 415 with the API's code."""
    service = await started(start_service)
    headers = {**HEADERS, "Content-Type": "text/plain"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(service.url + "/mcp", data=b"{}", headers=headers) as response,
    ):
        body = await response.json()
    assert (415, "unsupported_media_type") == (response.status, body["error"]["data"]["code"])
