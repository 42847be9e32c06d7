"""Fakes that ship with Sentinel, for tests of hook sessions (STYLE habit 2).

``FakeOpenAIServer`` and ``FakeAnthropicServer`` are real HTTP servers on 127.0.0.1 that
speak just enough of ``POST /v1/chat/completions`` and ``POST /v1/messages`` for the official
SDKs. Each answers from a script of canned replies, in order, and records every request body,
so a test can drive a session and then assert the model name sent, the tools offered and the
messages (tool results included)::

    async with FakeOpenAIServer() as server:
        server.reply_tool_call("sentinel_act", {"action": "notify", "message": "disk full"})
        server.reply_text("Notified the on-call.")
        # models: {local: {type: openai, baseUrl: <server.url>, model: qwen2.5:7b}}
        ...
        assert "qwen2.5:7b" == server.requests[0]["model"]

When the script is exhausted every request gets the plain text ``done``. ``fail(500)`` answers
one request with an error status; ``hang()`` never answers one (until ``stop()``), to test timeouts.
``reply_text_when(match, text)`` answers every request that ``match`` picks, ahead of the script,
for requests whose place in the order a test cannot know (a compaction's summary request);
``answer_when(match, answer)`` does the same with text computed (and possibly held) per request,
e.g. a judge rule's verdict.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, ClassVar, Self

from aiohttp import web

HOST = "127.0.0.1"
Answer = Callable[[dict[str, Any]], Awaitable[str]]
"""Computes the text of a reply from the request body (``answer_when``)."""
DONE_TEXT = "done"


@dataclass(frozen=True)
class CannedCall:
    """One tool call in a canned reply; ``arguments`` as a string is sent as that raw text."""

    name: str
    arguments: dict[str, Any] | str
    id: str


@dataclass(frozen=True)
class CannedReply:
    """One scripted answer: text and/or tool calls, an error status, or no answer at all."""

    text: str | None = None
    calls: tuple[CannedCall, ...] = ()
    status: int = 200
    error: str = ""
    hang: bool = False
    after: asyncio.Event | None = None  # sent only once this is set (a slow model)


@dataclass
class _Recorded:
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)


class FakeModelServer(ABC):
    """The common part of the fake model servers: script, recording, lifecycle."""

    path: ClassVar[str]
    url_suffix: ClassVar[str]
    id_prefix: ClassVar[str]

    def __init__(self) -> None:
        self.script: deque[CannedReply] = deque()
        self.standing: list[tuple[Callable[[dict[str, Any]], bool], CannedReply]] = []
        self.answerers: list[tuple[Callable[[dict[str, Any]], bool], Answer]] = []
        self._recorded = _Recorded()
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._release = asyncio.Event()
        self._port = 0
        self.usage: tuple[int, int] | None = (10, 5)  # input, output tokens per reply; None: not reported

    @property
    def url(self) -> str:
        """The value for the model entry's ``baseUrl``."""
        if self._runner is None:
            raise RuntimeError("the fake model server is not started")
        return f"http://{HOST}:{self._port}{self.url_suffix}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request body received, in order."""
        return self._recorded.bodies

    @property
    def request_sizes(self) -> list[int]:
        """The size in bytes of every request body received, in order."""
        return self._recorded.sizes

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """The headers of every request received (names in lower case), in order."""
        return self._recorded.headers

    def reply_text(self, text: str) -> Self:
        """Answer the next request with plain text."""
        self.script.append(CannedReply(text=text))
        return self

    def reply_text_when(self, match: Callable[[dict[str, Any]], bool], text: str) -> Self:
        """Answer every request whose body ``match`` accepts with plain text, ahead of the script."""
        self.standing.append((match, CannedReply(text=text)))
        return self

    def answer_when(self, match: Callable[[dict[str, Any]], bool], answer: Answer) -> Self:
        """Answer every request whose body ``match`` accepts with the text ``answer(body)`` returns,
        ahead of everything else. ``answer`` is a coroutine function, so it may hold a request
        (until another arrives, or for ever: a timeout) or raise to fail it with a 500."""
        self.answerers.append((match, answer))
        return self

    def reply_tool_call(
        self,
        name: str,
        arguments: dict[str, Any] | str,
        *,
        text: str | None = None,
        call_id: str | None = None,
        after: asyncio.Event | None = None,
    ) -> Self:
        """Answer the next request with one tool call (and optional text); with ``after``, only
        once that event is set (a model still thinking)."""
        ids = [call_id] if call_id else None
        return self.reply_tool_calls([(name, arguments)], text=text, call_ids=ids, after=after)

    def reply_tool_calls(
        self,
        calls: list[tuple[str, dict[str, Any] | str]],
        *,
        text: str | None = None,
        call_ids: list[str] | None = None,
        after: asyncio.Event | None = None,
    ) -> Self:
        """Answer the next request with several tool calls; ids default to ``<prefix>1``, ``<prefix>2`` …"""
        ids = call_ids or [f"{self.id_prefix}{next(self._ids)}" for _ in calls]
        canned = tuple(
            CannedCall(name, arguments, id) for (name, arguments), id in zip(calls, ids, strict=True)
        )
        self.script.append(CannedReply(text=text, calls=canned, after=after))
        return self

    def fail(self, status: int = 500, message: str = "the fake server failed on purpose") -> Self:
        """Answer the next request with an error status and an API-shaped error body."""
        self.script.append(CannedReply(status=status, error=message))
        return self

    def hang(self) -> Self:
        """Never answer the next request (until ``stop()``): for client timeouts."""
        self.script.append(CannedReply(hang=True))
        return self

    async def start(self) -> None:
        """Listen on 127.0.0.1 on a free port."""
        app = web.Application()
        app.router.add_post(self.path, self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, HOST, 0)
        await site.start()
        self._port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        """Release hanging requests and stop listening."""
        self._release.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def _handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        body: dict[str, Any] = json.loads(raw)
        self._recorded.bodies.append(body)
        self._recorded.sizes.append(len(raw))
        self._recorded.headers.append({k.lower(): v for k, v in request.headers.items()})
        answer = next((answer for match, answer in self.answerers if match(body)), None)
        if answer is not None:
            try:
                text = await answer(body)
            except Exception as exc:  # the answerer's way of failing a request on purpose
                return web.json_response(self.error_body(500, str(exc)), status=500)
            return web.json_response(self.render(CannedReply(text=text), body))
        standing = next((reply for match, reply in self.standing if match(body)), None)
        canned = standing or (self.script.popleft() if self.script else CannedReply(text=DONE_TEXT))
        if canned.after is not None:
            await canned.after.wait()
        if canned.hang:
            await self._release.wait()
            return web.json_response(self.error_body(503, "the fake server stopped"), status=503)
        if canned.status != 200:
            return web.json_response(self.error_body(canned.status, canned.error), status=canned.status)
        return web.json_response(self.render(canned, body))

    @abstractmethod
    def render(self, canned: CannedReply, request: dict[str, Any]) -> dict[str, Any]:
        """The wire form of a canned reply to ``request``."""

    @abstractmethod
    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """The wire form of an error."""


class FakeOpenAIServer(FakeModelServer):
    """``POST /v1/chat/completions``; ``url`` ends in ``/v1`` like an OpenAI-compatible ``baseUrl``."""

    path = "/v1/chat/completions"
    url_suffix = "/v1"
    id_prefix = "call_"

    def render(self, canned: CannedReply, request: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": canned.text}
        if canned.calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": _json_text(call.arguments)},
                }
                for call in canned.calls
            ]
        return {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": request.get("model", ""),
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if canned.calls else "stop"}
            ],
            **self._usage(),
        }

    def _usage(self) -> dict[str, Any]:
        if self.usage is None:
            return {}
        prompt, completion = self.usage
        return {
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
        }

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": "fake_error", "code": status}}


class FakeAnthropicServer(FakeModelServer):
    """``POST /v1/messages``; ``url`` is the server root, like Anthropic's ``baseUrl``."""

    path = "/v1/messages"
    url_suffix = ""
    id_prefix = "toolu_"

    def render(self, canned: CannedReply, request: dict[str, Any]) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": canned.text}] if canned.text else []
        content += [
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
            for call in canned.calls
        ]
        return {
            "id": f"msg_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": request.get("model", ""),
            "content": content,
            "stop_reason": "tool_use" if canned.calls else "end_turn",
            "stop_sequence": None,
            **self._usage(),
        }

    def _usage(self) -> dict[str, Any]:
        if self.usage is None:
            return {}
        return {"usage": {"input_tokens": self.usage[0], "output_tokens": self.usage[1]}}

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"type": "error", "error": {"type": "fake_error", "message": message}}


def _json_text(arguments: dict[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)
