"""A stand-in for the Slack Web API on 127.0.0.1: ``chat.postMessage``, ``chat.update`` and
``chat.postEphemeral`` (kept in ``ephemerals``), as Slack answers them (HTTP 200 with
``{"ok": true, "ts", "channel"}``, or ``{"ok": false, "error"}``).

It keeps the channel's messages, so a test reads what a person would see: roots, their replies
(``thread_ts``) and each root's text after updates. Like Slack, ``chat.update`` wants the channel's
id (``C…``), not its name, and a reply to an unknown ``thread_ts`` is refused. ``fail_posts`` and
``fail_updates`` make a method answer an error code; ``hold_posts`` keeps posts waiting until
``release``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

CHANNEL_ID = "C0OPS"
DISK_WATCHER = """\
id: disk
strategy: webhook
conditions: [{path: used, op: gte, value: 90}]
fire: {eventName: disk_full, priority: high}
deliveryTargets: [ops]
"""
"""A watcher whose fires page the ``ops`` Slack target (the services' tests point it at the stand-in)."""


@dataclass
class Posted:
    """One message in the channel, as it reads now."""

    ts: str
    channel: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None = None
    updates: int = 0
    broadcast: bool = False  # a thread reply also shown in the channel (reply_broadcast)

    @property
    def callback_id(self) -> str:
        """The callback its context block names."""
        facts = [e["text"] for block in self.blocks if block["type"] == "context" for e in block["elements"]]
        return next(f.removeprefix("*Callback:* ") for f in facts if f.startswith("*Callback:*"))

    @property
    def kind(self) -> str:
        facts = [e["text"] for block in self.blocks if block["type"] == "context" for e in block["elements"]]
        return next(f.removeprefix("*Kind:* ") for f in facts if f.startswith("*Kind:*"))


@dataclass
class SlackApi:
    """The fake Web API; ``messages`` in the order they were posted."""

    messages: list[Posted] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)  # method names, in order
    ephemerals: list[tuple[str, str, str]] = field(default_factory=list)  # (channel, user, text)
    fail_updates: str | None = None  # an error code chat.update answers
    fail_posts: str | None = None  # an error code chat.postMessage answers
    hold_posts: bool = False
    hold_updates: bool = False  # chat.update waits for ``release_updates`` (a slow Slack API)
    server: TestServer | None = None
    _released: asyncio.Event = field(default_factory=asyncio.Event)
    _updates_released: asyncio.Event = field(default_factory=asyncio.Event)
    _arrived: int = 0

    @property
    def arrived(self) -> int:
        """chat.postMessage requests received so far (held ones included)."""
        return self._arrived

    def release(self) -> None:
        self._released.set()

    def release_updates(self) -> None:
        self._updates_released.set()

    def roots(self) -> list[Posted]:
        return [m for m in self.messages if m.thread_ts is None]

    def replies(self, root: Posted) -> list[Posted]:
        return [m for m in self.messages if m.thread_ts == root.ts]

    def base(self) -> str:
        """The ``apiBase`` of a target that talks to this stand-in."""
        assert self.server is not None, "start() first"
        return str(self.server.make_url("/api/"))

    async def _body(self, request: web.Request) -> dict[str, Any]:
        if request.content_type == "application/json":
            data: dict[str, Any] = await request.json()
            return data
        form = dict(await request.post())
        for key in ("blocks",):
            if isinstance(form.get(key), str):
                form[key] = json.loads(str(form[key]))
        return form

    async def _post_message(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        self.calls.append("chat.postMessage")
        self._arrived += 1
        if self.hold_posts:
            await self._released.wait()
        if self.fail_posts is not None:
            return web.json_response({"ok": False, "error": self.fail_posts})
        thread_ts = body.get("thread_ts")
        if thread_ts is not None and not any(m.ts == thread_ts for m in self.messages):
            return web.json_response({"ok": False, "error": "thread_not_found"})
        channel = CHANNEL_ID if body["channel"] in ("#ops", CHANNEL_ID) else None
        if channel is None:
            return web.json_response({"ok": False, "error": "channel_not_found"})
        ts = f"1700000000.{len(self.messages) + 1:06d}"
        broadcast = body.get("reply_broadcast") in (True, "true", "1", 1)
        posted = Posted(
            ts, channel, body.get("text", ""), body.get("blocks", []), thread_ts, broadcast=broadcast
        )
        self.messages.append(posted)
        return web.json_response(
            {"ok": True, "channel": channel, "ts": ts, "message": {"text": body.get("text")}}
        )

    async def _update(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        self.calls.append("chat.update")
        if self.hold_updates:
            await self._updates_released.wait()
        if self.fail_updates is not None:
            return web.json_response({"ok": False, "error": self.fail_updates})
        if body.get("channel") != CHANNEL_ID:  # Slack wants the id here, not the name
            return web.json_response({"ok": False, "error": "channel_not_found"})
        found = [m for m in self.messages if m.ts == body.get("ts")]
        if not found:
            return web.json_response({"ok": False, "error": "message_not_found"})
        found[0].text, found[0].blocks = body.get("text", ""), body.get("blocks", [])
        found[0].updates += 1
        return web.json_response({"ok": True, "channel": CHANNEL_ID, "ts": found[0].ts})

    async def _ephemeral(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        self.calls.append("chat.postEphemeral")
        if body.get("channel") != CHANNEL_ID:
            return web.json_response({"ok": False, "error": "channel_not_found"})
        self.ephemerals.append((str(body["channel"]), str(body.get("user")), str(body.get("text"))))
        return web.json_response({"ok": True, "message_ts": "1700000000.999999"})

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/api/chat.postMessage", self._post_message)
        app.router.add_post("/api/chat.update", self._update)
        app.router.add_post("/api/chat.postEphemeral", self._ephemeral)
        self.server = TestServer(app, host="127.0.0.1")
        await self.server.start_server()

    async def close(self) -> None:
        self.release()
        self.release_updates()
        if self.server is not None:
            await self.server.close()


@pytest.fixture
async def slack_api() -> AsyncIterator[SlackApi]:
    """A started Slack Web API stand-in, closed after the test."""
    api = SlackApi()
    await api.start()
    yield api
    await api.close()
