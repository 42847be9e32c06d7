"""Every strategy makes the service fire, fed by a real local source."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from sentinel_hooks.service import Service
from tests.service.conftest import Starter
from tests.support import Endpoint, wait_for


async def fired_kinds(service: Service, watcher_id: str) -> list[str]:
    page = await service.store.list_contracts(watcher_id=watcher_id)
    return [c.trigger.kind for c in page.items]


def watcher(watcher_id: str, body: str, conditions: str = "[{path: level, op: eq, value: crit}]") -> str:
    return f"id: {watcher_id}\n{body}\nconditions: {conditions}\ndeliveryTargets: [console]\n"


async def test_http_long_poll_fires(start_service: Starter, endpoint: Endpoint) -> None:
    """http-long-poll: an answer after a hold fires."""
    answers = iter([{"level": "info"}, {"level": "crit"}])

    async def hold(request: web.Request) -> web.Response:
        await asyncio.sleep(0.05)
        return web.json_response(next(answers, {"level": "info"}))

    endpoint.handler = hold
    body = f'strategy: http-long-poll\nendpoint: "{endpoint.url()}"\ntimeoutMs: 2000'
    service = await start_service(watchers={"w.yaml": watcher("lp", body)})
    await wait_for(lambda: fired_kinds(service, "lp"), what="a long-poll fire")


async def test_sse_fires(start_service: Starter, endpoint: Endpoint) -> None:
    """sse: an event whose data matches fires; comments and other event types are ignored."""

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b': keep-alive\n\nevent: other\ndata: {"level": "crit"}\n\n')
        await response.write(b'event: alert\ndata: {"level":\ndata: "crit"}\n\n')
        await asyncio.sleep(5)
        return response

    endpoint.handler = stream
    body = f'strategy: sse\nendpoint: "{endpoint.url()}"\neventTypes: [alert]'
    service = await start_service(watchers={"w.yaml": watcher("events", body)})
    await wait_for(lambda: fired_kinds(service, "events"), what="an SSE fire")
    assert ["match"] == await fired_kinds(service, "events")


async def test_websocket_fires(start_service: Starter, endpoint: Endpoint) -> None:
    """websocket: the subscribe message is sent; a matching message fires."""

    async def socket(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        hello = await ws.receive_json(timeout=5)
        await ws.send_json({"level": "crit", "topic": hello["subscribe"]})
        await asyncio.sleep(5)
        return ws

    endpoint.handler = socket
    url = endpoint.url().replace("http://", "ws://")
    body = f'strategy: websocket\nendpoint: "{url}"\nsubscribeMessage: {{subscribe: prices}}'
    service = await start_service(watchers={"w.yaml": watcher("ws", body)})
    await wait_for(lambda: fired_kinds(service, "ws"), what="a websocket fire")


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[object]:
    import redis.asyncio as aioredis

    client = aioredis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


@pytest.mark.redis
async def test_redis_pubsub_fires(start_service: Starter, redis_client: object, redis_url: str) -> None:
    """redis-pubsub: a published matching message fires."""
    channel = f"sentinel-test-{uuid.uuid4().hex}"
    body = f'strategy: redis-pubsub\nredisUrl: "{redis_url}"\nchannel: "{channel}"'
    service = await start_service(watchers={"w.yaml": watcher("ps", body)})

    async def published() -> list[str]:
        await redis_client.publish(channel, json.dumps({"level": "crit"}))  # type: ignore[attr-defined]
        return await fired_kinds(service, "ps")

    await wait_for(published, interval_s=0.1, what="a pub/sub fire")


@pytest.mark.redis
async def test_redis_stream_fires(start_service: Starter, redis_client: object, redis_url: str) -> None:
    """redis-stream: an entry added to the stream fires (consumer group)."""
    stream = f"sentinel-test-{uuid.uuid4().hex}"
    body = f'strategy: redis-stream\nredisUrl: "{redis_url}"\nstream: "{stream}"'
    service = await start_service(watchers={"w.yaml": watcher("st", body)})
    try:
        await wait_for(lambda: redis_client.exists(stream), what="the consumer group")  # type: ignore[attr-defined]
        await redis_client.xadd(stream, {"data": json.dumps({"level": "crit"})})  # type: ignore[attr-defined]
        await wait_for(lambda: fired_kinds(service, "st"), what="a stream fire")
    finally:
        await redis_client.delete(stream)  # type: ignore[attr-defined]


async def test_command_probe_fires_terminal(start_service: Starter) -> None:
    """command: a probe that reports class terminal fires a terminal trigger."""
    script = "import json; print(json.dumps({'class': 'terminal', 'summary': 'done'}))"
    argv = f"[{json.dumps(sys.executable)}, -c, {json.dumps(script)}]"
    body = f"strategy: command\ncommand: {argv}\nintervalMs: 100"
    service = await start_service(watchers={"w.yaml": watcher("probe", body, conditions="[]")})
    await wait_for(lambda: fired_kinds(service, "probe"), what="a terminal fire")
    assert "terminal" == (await fired_kinds(service, "probe"))[-1]


async def test_evm_call_fires(start_service: Starter, endpoint: Endpoint) -> None:
    """evm-call: a decoded eth_call result below the threshold fires."""
    from eth_abi import encode

    async def rpc(request: web.Request) -> web.Response:
        call = await request.json()
        result = "0x" + encode(["uint256"], [5]).hex()
        return web.json_response({"jsonrpc": "2.0", "id": call["id"], "result": result})

    endpoint.handler = rpc
    body = (
        f'strategy: evm-call\nendpoint: "{endpoint.url()}"\nintervalMs: 100\n'
        'evmCall: {to: "0x00000000000000000000000000000000000000aa", signature: "balance()(uint256)"}'
    )
    service = await start_service(
        watchers={"w.yaml": watcher("evm", body, conditions="[{path: value, op: lt, value: 10}]")}
    )
    await wait_for(lambda: fired_kinds(service, "evm"), what="an evm-call fire")
