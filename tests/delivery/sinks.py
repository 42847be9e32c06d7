"""Real local receivers for delivery tests: a recording webhook sink and a fake Slack, on 127.0.0.1.

``sink`` and ``slack`` are their fixtures (conftests that use them import them).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from multidict import CIMultiDict

Reply = Callable[[web.Request], Awaitable[web.StreamResponse]]
SLACK_WEBHOOK_PATH = "/services/T/B/X"
SLACK_POST_MESSAGE_PATH = "/api/chat.postMessage"


@dataclass(frozen=True)
class Received:
    """One request as the receiver saw it."""

    method: str
    path: str
    headers: CIMultiDict[str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


async def answer_ok(request: web.Request) -> web.StreamResponse:
    """What a webhook receiver says when it took the message."""
    return web.json_response({"received": True})


async def slack_default(request: web.Request) -> web.StreamResponse:
    """Slack's success answers: ``ok`` for an incoming webhook, ``{"ok": true}`` for the Web API."""
    if request.path == SLACK_WEBHOOK_PATH:
        return web.Response(text="ok")
    return web.json_response({"ok": True, "channel": "C1", "ts": "1700000000.000100"})


class Sink:
    """Records every request (any method, any path) and answers with ``reply`` (settable per test)."""

    def __init__(self, reply: Reply = answer_ok) -> None:
        self.received: list[Received] = []
        self.reply = reply
        self.server: TestServer | None = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.received.append(Received(request.method, request.path, CIMultiDict(request.headers), body))
        return await self.reply(request)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    async def start(self) -> None:
        self.server = TestServer(self.app(), host="127.0.0.1")
        await self.server.start_server()

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()

    def url(self, path: str = "/") -> str:
        assert self.server is not None, "start() the sink first"
        return str(self.server.make_url(path))


def json_reply(body: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    """A reply with a fixed JSON body, status and headers."""

    async def reply(request: web.Request) -> web.StreamResponse:
        return web.json_response(body, status=status, headers=headers)

    return reply


def text_reply(text: str, *, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    """A reply with a fixed text body, status and headers."""

    async def reply(request: web.Request) -> web.StreamResponse:
        return web.Response(text=text, status=status, headers=headers)

    return reply


def redirect_reply(location: str) -> Reply:
    """A 302 to ``location``."""

    async def reply(request: web.Request) -> web.StreamResponse:
        return web.Response(status=302, headers={"Location": location})

    return reply


@pytest.fixture
async def sink() -> AsyncIterator[Sink]:
    """A webhook receiver on 127.0.0.1 that records requests and answers 200."""
    receiver = Sink()
    await receiver.start()
    yield receiver
    await receiver.close()


@pytest.fixture
async def slack() -> AsyncIterator[Sink]:
    """A fake Slack on 127.0.0.1: ``/services/T/B/X`` (incoming webhook) and ``/api/chat.postMessage``."""
    receiver = Sink(slack_default)
    await receiver.start()
    yield receiver
    await receiver.close()
