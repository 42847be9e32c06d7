"""Fixtures for backend tests: fake model servers on 127.0.0.1 and backends that are always closed."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from sentinel_hooks.callbacks.backends.anthropic import AnthropicBackend
from sentinel_hooks.callbacks.backends.base import ToolSpec
from sentinel_hooks.callbacks.backends.openai import OpenAIBackend
from sentinel_hooks.config.service import AnthropicModel, OpenAIModel
from sentinel_hooks.testing import FakeAnthropicServer, FakeOpenAIServer

API_KEY = "sk-test-secret-key"
ACT = ToolSpec(
    name="sentinel_act",
    description="Deliver a message or run a command.",
    parameters={
        "type": "object",
        "properties": {"action": {"type": "string"}, "message": {"type": "string"}},
        "required": ["action"],
        "additionalProperties": False,
    },
)
ESCALATE = ToolSpec(
    name="sentinel_escalate",
    description="Ask a human.",
    parameters={"type": "object", "properties": {"reason": {"type": "string"}}, "required": ["reason"]},
)
TOOLS = [ACT, ESCALATE]
HELLO = [{"role": "system", "content": "You watch things."}, {"role": "user", "content": "disk at 91%"}]

MakeOpenAI = Callable[..., OpenAIBackend]
MakeAnthropic = Callable[..., AnthropicBackend]


def refused_url() -> str:
    """A loopback URL on a port nobody listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
async def openai_server() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
async def anthropic_server() -> AsyncIterator[FakeAnthropicServer]:
    async with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
async def closing() -> AsyncIterator[Callable[[Any], Any]]:
    """Register backends to close at teardown (an open SDK client is a ResourceWarning)."""
    opened: list[Callable[[], Awaitable[None]]] = []

    def register(backend: Any) -> Any:
        opened.append(backend.close)
        return backend

    yield register
    for close in opened:
        await close()


@pytest.fixture
def make_openai(openai_server: FakeOpenAIServer, closing: Callable[[Any], Any]) -> MakeOpenAI:
    """An OpenAIBackend named ``local`` for model ``qwen2.5:7b`` at the fake server; keys override."""

    def make(**keys: Any) -> OpenAIBackend:
        spec = {"type": "openai", "baseUrl": openai_server.url, "model": "qwen2.5:7b", "apiKey": API_KEY}
        backend = OpenAIBackend("local", OpenAIModel.model_validate({**spec, **keys}))
        result: OpenAIBackend = closing(backend)
        return result

    return make


@pytest.fixture
def make_anthropic(anthropic_server: FakeAnthropicServer, closing: Callable[[Any], Any]) -> MakeAnthropic:
    """An AnthropicBackend named ``claude`` for ``claude-haiku-4-5`` at the fake server; keys override."""

    def make(**keys: Any) -> AnthropicBackend:
        spec = {
            "type": "anthropic",
            "baseUrl": anthropic_server.url,
            "model": "claude-haiku-4-5",
            "apiKey": API_KEY,
        }
        backend = AnthropicBackend("claude", AnthropicModel.model_validate({**spec, **keys}))
        result: AnthropicBackend = closing(backend)
        return result

    return make
