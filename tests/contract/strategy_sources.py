"""Real local sources for the strategy contract suite, one rig per strategy.

A rig builds its strategy (through the registry for the real ones) and drives the source it
watches: ``offer(n)`` makes the source hold out level ``n`` next (what is observed is
``observed(n)``), ``waiting()`` says whether the strategy now waits at the source, ``held()``
counts what of the strategy's the source still sees open (connections, probe processes),
``drop()`` ends a subscription from the source's side, and ``unreachable()`` builds the same
strategy aimed at a source that is not there.

HTTP sources are aiohttp apps on 127.0.0.1 that hold each request until a level is offered
(so a poll and a long-poll alike wait for news); Redis sources use the tests' own redis-server;
the command probe is a small Python program that waits for its report file.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import redis.asyncio
from aiohttp import web

from sentinel_hooks.config.watcher import WATCHER_ADAPTER
from sentinel_hooks.watchers.strategies.scripted import ScriptedPoll, ScriptedSubscription
from sentinel_hooks.watchers.strategy import (
    PollStrategy,
    Strategy,
    StrategyContext,
    SubscribeStrategy,
    TransientObserveError,
    create_strategy,
)
from tests.contract.conftest import Serve, refused_port
from tests.support import wait_for

DROP = object()  # put on a push source's queue: the source ends the connection
LEVEL_SIGNATURE = "level()(uint256)"
CONTRACT = "0x" + "11" * 20
# Waits for report.txt in the working directory, prints it and removes it; while it runs, its pid
# is a file in running/ (what ``held`` counts, with a check that the process still lives).
PROBE = """
import os, pathlib, sys, time
running = pathlib.Path("running"); running.mkdir(exist_ok=True); (running / str(os.getpid())).touch()
report = pathlib.Path("report.txt")
while not report.exists():
    time.sleep(0.01)
text = report.read_text(); report.unlink(); sys.stdout.write(text)
(running / str(os.getpid())).unlink()
"""


def level(n: int) -> dict[str, Any]:
    """What most sources send for level ``n`` (and what is observed of it)."""
    return {"level": n}


class Rig(ABC):
    """A strategy and its source; subclasses say how the source is driven."""

    kind: type[PollStrategy] | type[SubscribeStrategy]
    strategy: Strategy
    context: StrategyContext

    @abstractmethod
    async def offer(self, n: int) -> None:
        """Make the source offer level ``n``."""

    def observed(self, n: int) -> Any:
        return level(n)

    async def waiting(self) -> bool:
        return await self.held() > 0

    @abstractmethod
    async def held(self) -> int:
        """How many connections or requests the source holds now."""

    async def drop(self) -> None:
        """Drop every connection the source holds (subscription sources only)."""
        raise AssertionError(f"{type(self).__name__} polls: it holds no connection to drop")

    @abstractmethod
    def unreachable(self) -> Strategy:
        """The same strategy pointed at a source that is not there."""

    async def close(self) -> None:
        await self.strategy.close()


def watcher(**keys: Any) -> Any:
    return WATCHER_ADAPTER.validate_python({"id": f"w-{uuid.uuid4().hex[:12]}", **keys})


# -- HTTP: each request is held until a level is offered ----------------------------------------


class HeldAnswers:
    """Answers each request with the next level offered; a request waits for one until then."""

    def __init__(self) -> None:
        self.levels: asyncio.Queue[int] = asyncio.Queue()
        self.held = 0

    async def next_level(self) -> int:
        self.held += 1
        try:
            return await self.levels.get()
        finally:
            self.held -= 1

    async def json_level(self, request: web.Request) -> web.Response:
        return web.json_response(level(await self.next_level()))

    async def rpc_level(self, request: web.Request) -> web.Response:
        body = await request.json()
        n = await self.next_level()
        return web.json_response(
            {"jsonrpc": "2.0", "id": body["id"], "result": "0x" + f"{n:x}".rjust(64, "0")}
        )


@dataclass
class HttpRig(Rig):
    """http-poll, http-long-poll and evm-call: a held answer per request."""

    strategy: Strategy
    answers: HeldAnswers
    keys: dict[str, Any]
    context: StrategyContext
    kind: type[PollStrategy] | type[SubscribeStrategy] = PollStrategy
    rpc: bool = False

    @classmethod
    async def start(cls, serve: Serve, context: StrategyContext, strategy: str) -> HttpRig:
        answers = HeldAnswers()
        app = web.Application()
        rpc = strategy == "evm-call"
        app.router.add_route("*", "/source", answers.rpc_level if rpc else answers.json_level)
        server = await serve(app)
        keys: dict[str, Any] = {"strategy": strategy}
        if strategy != "http-long-poll":
            keys["intervalMs"] = 60_000
        if rpc:
            keys["evmCall"] = {"to": CONTRACT, "signature": LEVEL_SIGNATURE}
        built = create_strategy(watcher(endpoint=str(server.make_url("/source")), **keys), context)
        return cls(built, answers, keys, context, rpc=rpc)

    async def offer(self, n: int) -> None:
        self.answers.levels.put_nowait(n)

    def observed(self, n: int) -> Any:
        return {"value": n, "outputs": [n]} if self.rpc else level(n)

    async def held(self) -> int:
        return self.answers.held

    def unreachable(self) -> Strategy:
        return create_strategy(
            watcher(endpoint=f"http://127.0.0.1:{refused_port()}/source", **self.keys), self.context
        )


# -- SSE and WebSocket: a connection that pushes each level offered -----------------------------


class Pushes:
    """Pushes each level offered down the open connection; ``DROP`` ends it."""

    def __init__(self) -> None:
        self.levels: asyncio.Queue[Any] = asyncio.Queue()
        self.held = 0

    async def events(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        self.held += 1
        try:
            while (item := await self.levels.get()) is not DROP:
                await response.write(f"data: {json.dumps(level(item))}\n\n".encode())
        finally:
            self.held -= 1
        return response

    async def socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.held += 1
        reader = asyncio.ensure_future(self._read_until_closed(ws))
        try:
            while True:
                item = asyncio.ensure_future(self.levels.get())
                await asyncio.wait({item, reader}, return_when=asyncio.FIRST_COMPLETED)
                if not item.done():
                    item.cancel()
                    break
                if item.result() is DROP:
                    await ws.close()
                    break
                await ws.send_str(json.dumps(level(item.result())))
        finally:
            self.held -= 1
            reader.cancel()
        return ws

    @staticmethod
    async def _read_until_closed(ws: web.WebSocketResponse) -> None:
        async for _ in ws:  # answers the client's close frame
            pass


@dataclass
class PushRig(Rig):
    strategy: Strategy
    pushes: Pushes
    keys: dict[str, Any]
    context: StrategyContext
    kind: type[PollStrategy] | type[SubscribeStrategy] = SubscribeStrategy

    @classmethod
    async def start(cls, serve: Serve, context: StrategyContext, strategy: str) -> PushRig:
        pushes = Pushes()
        app = web.Application()
        app.router.add_get("/events", pushes.events)
        app.router.add_get("/ws", pushes.socket)
        server = await serve(app)
        path = "/events" if strategy == "sse" else "/ws"
        scheme = "http" if strategy == "sse" else "ws"
        endpoint = str(server.make_url(path).with_scheme(scheme))
        keys = {"strategy": strategy}
        return cls(create_strategy(watcher(endpoint=endpoint, **keys), context), pushes, keys, context)

    async def offer(self, n: int) -> None:
        self.pushes.levels.put_nowait(n)

    async def held(self) -> int:
        return self.pushes.held

    async def drop(self) -> None:
        self.pushes.levels.put_nowait(DROP)

    def unreachable(self) -> Strategy:
        scheme = "http" if self.keys["strategy"] == "sse" else "ws"
        endpoint = f"{scheme}://127.0.0.1:{refused_port()}/"
        return create_strategy(watcher(endpoint=endpoint, **self.keys), self.context)


# -- Redis: pub/sub and streams on the tests' own server ------------------------------------------


@dataclass
class RedisRig(Rig):
    strategy: Strategy
    client: redis.asyncio.Redis
    keys: dict[str, Any]
    watcher_id: str
    context: StrategyContext
    kind: type[PollStrategy] | type[SubscribeStrategy] = SubscribeStrategy

    @classmethod
    async def start(cls, url: str, context: StrategyContext, strategy: str, prefix: str) -> RedisRig:
        client = redis.asyncio.Redis.from_url(url)
        if strategy == "redis-pubsub":
            keys: dict[str, Any] = {"strategy": strategy, "channel": f"{prefix}levels"}
        else:
            keys = {"strategy": strategy, "stream": f"{prefix}levels", "group": "g1"}
            await client.xgroup_create(keys["stream"], "g1", id="0", mkstream=True)
        spec = watcher(redisUrl=url, **keys)
        return cls(create_strategy(spec, context), client, keys, spec.id, context)

    async def offer(self, n: int) -> None:
        data = json.dumps(level(n))
        if "stream" in self.keys:
            await self.client.xadd(self.keys["stream"], {"data": data})
            return
        channel = self.keys["channel"]  # published until heard: the strategy subscribes asynchronously
        await wait_for(lambda: self._published(channel, data), timeout_s=5, what=f"a subscriber of {channel}")

    async def _published(self, channel: str, data: str) -> bool:
        return int(await self.client.publish(channel, data)) > 0

    async def waiting(self) -> bool:
        if "channel" in self.keys:
            [(_, subscribers)] = await self.client.pubsub_numsub(self.keys["channel"])
            return int(subscribers) > 0
        return any("b" in info.get("flags", "") for info in await self._connections())

    async def held(self) -> int:
        return len(await self._connections())

    async def drop(self) -> None:
        for info in await self._connections():
            await self.client.client_kill_filter(_id=info["id"])

    async def _connections(self) -> list[dict[str, Any]]:
        infos = cast(list[dict[str, Any]], await self.client.client_list())
        return [info for info in infos if info.get("name") == f"sentinel:{self.watcher_id}"]

    def unreachable(self) -> Strategy:
        return create_strategy(
            watcher(redisUrl=f"redis://127.0.0.1:{refused_port()}/0", **self.keys), self.context
        )

    async def close(self) -> None:
        await self.strategy.close()
        await self.client.aclose()


# -- command: a probe process that waits for its report ----------------------------------------


@dataclass
class ProbeRig(Rig):
    strategy: Strategy
    folder: Path
    context: StrategyContext
    kind: type[PollStrategy] | type[SubscribeStrategy] = PollStrategy

    @classmethod
    def start(cls, context: StrategyContext) -> ProbeRig:
        spec = watcher(strategy="command", command=[sys.executable, "-c", PROBE], intervalMs=60_000)
        return cls(create_strategy(spec, context), context.base_dir, context)

    async def offer(self, n: int) -> None:
        partial = self.folder / "report.part"
        partial.write_text(json.dumps(level(n)), encoding="utf-8")
        partial.replace(self.folder / "report.txt")  # whole, never half written

    async def held(self) -> int:
        running = self.folder / "running"
        pids = [p.name for p in running.iterdir()] if running.exists() else []
        return sum(1 for pid in pids if _alive(int(pid)))

    def unreachable(self) -> Strategy:
        spec = watcher(strategy="command", command=[str(self.folder / "no-such-probe")], intervalMs=60_000)
        return create_strategy(spec, self.context)


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie nobody reaped yet does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in {"Z", "X"}


# -- the scripted fakes ----------------------------------------------------------------------


@dataclass
class ScriptedRig(Rig):
    strategy: Strategy
    context: StrategyContext
    kind: type[PollStrategy] | type[SubscribeStrategy] = PollStrategy

    @classmethod
    def start(cls, context: StrategyContext, *, subscription: bool) -> ScriptedRig:
        if subscription:
            return cls(ScriptedSubscription(clock=context.clock), context, SubscribeStrategy)
        return cls(ScriptedPoll(clock=context.clock), context, PollStrategy)

    @property
    def scripted(self) -> ScriptedPoll | ScriptedSubscription:
        return cast(ScriptedPoll | ScriptedSubscription, self.strategy)

    async def offer(self, n: int) -> None:
        self.scripted.feed(level(n))

    async def held(self) -> int:
        return self.scripted.waiting

    async def drop(self) -> None:
        self.scripted.feed(TransientObserveError("the source went away"))

    def unreachable(self) -> Strategy:
        unreachable = TransientObserveError("cannot reach the source")
        if isinstance(self.strategy, ScriptedSubscription):
            return ScriptedSubscription(unreachable, clock=self.context.clock)
        return ScriptedPoll(unreachable, clock=self.context.clock)


async def first(strategy: Strategy) -> Any:
    """One observation: ``poll()``, or the first of a new ``stream()`` (closed afterwards)."""
    if isinstance(strategy, PollStrategy):
        return await strategy.poll()
    stream = cast(AsyncIterator[Any], strategy.stream())
    try:
        return await anext(stream)
    finally:
        await cast(Any, stream).aclose()
