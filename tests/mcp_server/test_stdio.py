"""``sentinel mcp`` (SPEC.md §17): a real subprocess speaking MCP over stdio to the SDK's own client,
carrying each tool call to a Service started in the test through its HTTP API."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from sentinel_hooks.service import Service
from tests.cli.conftest import sentinel_command
from tests.mcp_server.conftest import BASE_TOOLS, NEW_WATCHER, TOKEN, WEBHOOK, body_of, server_settings
from tests.mcp_server.test_streamable_http import INITIALIZE
from tests.service.conftest import Starter

pytestmark = pytest.mark.slow  # each test starts `sentinel mcp` (about 3 s with the SDK's imports)


@asynccontextmanager
async def sentinel_mcp(cwd: Path, *args: str) -> AsyncIterator[Client]:
    """The SDK's client talking to `sentinel mcp ARGS` started in ``cwd``."""
    command = sentinel_command()
    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}
    params = StdioServerParameters(command=command[0], args=[*command[1:], "mcp", *args], env=env, cwd=cwd)
    async with Client(params) as client:
        yield client


async def started(start_service: Starter, *, approvals: bool = False) -> Service:
    return await start_service(watchers={"hook.yaml": WEBHOOK}, server=server_settings(approvals=approvals))


async def test_tools_and_calls_over_stdio(start_service: Starter, tmp_path: Path) -> None:
    """Without a config: no approvals; create, list, fire, follow the callback, ack, silence, and an
    unknown watcher as the API's 404 in an error result."""
    service = await started(start_service)
    item = await service.inbox.create("escalation", severity="warning", reason="slow", watcher_id="hook")
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    async with sentinel_mcp(empty, "--url", service.url, "--token", TOKEN) as client:
        listed = await client.list_tools()
        created = await client.call_tool("create_watcher", {"watcher": NEW_WATCHER})
        watchers = await client.call_tool("list_watchers", {"limit": 10})
        fired = await client.call_tool("fire_watcher", {"watcherId": "made-by-mcp"})
        callback = await client.call_tool("get_callback", {"callbackId": body_of(fired)["callbackId"]})
        acked = await client.call_tool("ack_inbox_item", {"itemId": item.id})
        silence = {"matchers": [{"path": "watcherId", "op": "eq", "value": "hook"}], "durationMs": 60_000}
        silenced = await client.call_tool("add_silence", {**silence, "comment": "maintenance"})
        unknown = await client.call_tool("get_watcher", {"watcherId": "nope"})
    assert BASE_TOOLS == {tool.name for tool in listed.tools}
    assert not created.is_error
    assert ["hook", "made-by-mcp"] == [w["id"] for w in body_of(watchers)["items"]]
    assert "made-by-mcp" == body_of(callback)["callback"]["watcherId"]
    assert ("acked", "mcp") == (body_of(acked)["item"]["status"], body_of(acked)["item"]["actor"])
    assert ("active", "mcp") == (
        body_of(silenced)["silence"]["state"],
        body_of(silenced)["silence"]["createdBy"],
    )
    assert unknown.is_error
    assert "not_found" == body_of(unknown)["error"]["code"]


async def test_approvals_and_token_from_the_config(start_service: Starter, tmp_path: Path) -> None:
    """With -c: the token comes from the config and mcpApprovals offers approve/deny."""
    service = await started(start_service, approvals=True)
    item = await service.inbox.create("approval", severity="warning", reason="restart?", actor="agent")
    config = tmp_path / "sentinel.yaml"
    async with sentinel_mcp(tmp_path, "-c", str(config), "--url", service.url, "--actor", "alice") as client:
        listed = await client.list_tools()
        approved = await client.call_tool("approve", {"itemId": item.id, "note": "go"})
    assert BASE_TOOLS | {"approve", "deny"} == {tool.name for tool in listed.tools}
    assert ("approved", "alice") == (body_of(approved)["item"]["status"], body_of(approved)["item"]["actor"])


async def test_wrong_token_is_the_api_401(start_service: Starter, tmp_path: Path) -> None:
    """A rejected token reaches the agent as the API's 401 JSON in an error result."""
    service = await started(start_service)
    async with sentinel_mcp(tmp_path, "--url", service.url, "--token", "wrong-token-0123456789") as client:
        result = await client.call_tool("list_watchers", {})
    assert result.is_error
    assert "unauthorized" == body_of(result)["error"]["code"]


async def test_unreachable_service_is_an_error_result(tmp_path: Path) -> None:
    """With no service at the URL each call is an error result saying so; the server keeps running."""
    async with sentinel_mcp(tmp_path, "--url", "http://127.0.0.1:9") as client:
        first = await client.call_tool("list_inbox", {})
        second = await client.call_tool("list_watchers", {})
    assert first.is_error
    assert second.is_error
    assert "unreachable" == body_of(first)["error"]["code"]
    assert "no Sentinel service answers at http://127.0.0.1:9" in body_of(first)["error"]["message"]


def test_missing_config_exits_1(tmp_path: Path) -> None:
    """`sentinel mcp -c missing.yaml` exits 1 with a one-line message, before speaking MCP."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
    done = subprocess.run(
        [*sentinel_command(), "mcp", "-c", str(tmp_path / "missing.yaml"), "--url", "http://127.0.0.1:9"],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    assert (1, "") == (done.returncode, done.stdout)
    assert 1 == len(done.stderr.strip().splitlines())
    assert "missing.yaml" in done.stderr


async def test_a_message_with_a_duplicate_key_is_a_parse_error(tmp_path: Path) -> None:
    """A message with a key given twice is refused as the API refuses such a body: a JSON-RPC parse
    error without an id, naming the key, and no tool runs (the SDK used the last value)."""
    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}
    process = await asyncio.create_subprocess_exec(
        *sentinel_command(),
        *("mcp", "--url", "http://127.0.0.1:9"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
        env=env,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    twice = '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", '
    twice += '"params": {"name": "list_inbox", "name": "list_watchers", "arguments": {}}}\n'
    try:
        process.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        await asyncio.wait_for(process.stdout.readline(), timeout=30)
        process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n' + twice.encode())
        answer = json.loads(await asyncio.wait_for(process.stdout.readline(), timeout=30))
    finally:
        process.stdin.close()
        await asyncio.wait_for(process.wait(), timeout=30)
    assert (None, -32700, "invalid_json") == (
        answer["id"],
        answer["error"]["code"],
        answer["error"]["data"]["code"],
    )
    assert "duplicate key 'name'" in answer["error"]["message"]


async def test_a_viewer_token_lists_only_read_tools_over_stdio(
    start_service: Starter, tmp_path: Path
) -> None:
    """`sentinel mcp --token` of a viewer (SPEC §21) lists the read tools only, and a write tool it is
    asked for anyway is refused without a call (the service would answer 403 too)."""
    from tests.api.test_roles import TOKENS, VIEWER

    service = await start_service(watchers={"hook.yaml": WEBHOOK}, server=TOKENS)
    async with sentinel_mcp(tmp_path, "--url", service.url, "--token", VIEWER) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        refused = await client.call_tool("fire_watcher", {"watcherId": "hook"})
    assert {
        "list_watchers",
        "get_watcher",
        "list_callbacks",
        "get_callback",
        "list_inbox",
        "list_silences",
    } == listed
    assert (True, "forbidden") == (refused.is_error, body_of(refused)["error"]["code"])
    assert [] == (await service.store.list_contracts(limit=10)).items
