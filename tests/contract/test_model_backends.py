"""Every model backend keeps the ``ModelBackend`` contract, each against a real local stand-in of its
API (the fake servers of ``sentinel_hooks.testing`` on 127.0.0.1): one request per ``complete``,
the neutral reply back, ``ModelError`` with ``retryable`` and a message that names the entry and
never the key. The registry builds each ``models:`` type; the scripted backend needs no server.

Request shapes particular to one API are tested in tests/callbacks/backends/test_<provider>.py.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import TypeAdapter

from sentinel_hooks.callbacks.backends import MODULES, ModelBackend, create_backend
from sentinel_hooks.callbacks.backends.anthropic import AnthropicBackend
from sentinel_hooks.callbacks.backends.base import ModelError, ModelReply, ToolCall
from sentinel_hooks.callbacks.backends.openai import OpenAIBackend
from sentinel_hooks.callbacks.backends.scripted import ScriptedBackend
from sentinel_hooks.config.service import ModelSpec
from sentinel_hooks.errors import SentinelError
from sentinel_hooks.testing import FakeAnthropicServer, FakeModelServer, FakeOpenAIServer
from tests.callbacks.backends.conftest import API_KEY, HELLO, TOOLS, refused_url

SPECS: TypeAdapter[ModelSpec] = TypeAdapter(ModelSpec)
NOTIFY = {"action": "notify", "message": "disk at 91% on db-1"}


@dataclass(frozen=True)
class Wire:
    """A backend type with its fake server: ``make(**keys)`` builds the entry through the registry
    (camelCase keys override the spec), ``refused_base`` is a base URL nobody listens on."""

    name: str
    model: str
    server: FakeModelServer
    make: Callable[..., ModelBackend]
    refused_base: Callable[[], str]


@pytest.fixture(params=["openai", "anthropic"])
async def wire(request: pytest.FixtureRequest) -> AsyncIterator[Wire]:
    """A backend type and its fake server; the backends it made are closed after the test (an open
    SDK client is a ResourceWarning)."""
    kind: str = request.param
    server: FakeModelServer = FakeOpenAIServer() if kind == "openai" else FakeAnthropicServer()
    made: list[ModelBackend] = []
    async with server:
        if kind == "openai":
            name, model, suffix = "local", "qwen2.5:7b", "/v1"
        else:
            name, model, suffix = "claude", "claude-haiku-4-5", ""

        def make(**keys: Any) -> ModelBackend:
            spec = {"type": kind, "baseUrl": server.url, "model": model, "apiKey": API_KEY}
            made.append(create_backend(name, SPECS.validate_python(spec | keys)))
            return made[-1]

        yield Wire(name, model, server, make, lambda: refused_url() + suffix)
        for backend in made:
            await backend.close()


# -- what every backend that speaks to a server does --------------------------------------------


async def test_text_reply_is_returned(wire: Wire) -> None:
    """A plain text answer becomes the reply text, with the model name and usage the server reported."""
    wire.server.reply_text("All quiet.")
    reply = await wire.make().complete(HELLO, TOOLS)
    expected = ModelReply(text="All quiet.", model=wire.model, usage={"inputTokens": 10, "outputTokens": 5})
    assert expected == reply


async def test_a_reply_without_usage_has_none(wire: Wire) -> None:
    """A server that reports no usage gives an empty ``usage`` (the session then estimates, SPEC §20)."""
    wire.server.usage = None
    wire.server.reply_text("All quiet.")
    assert {} == (await wire.make().complete(HELLO, TOOLS)).usage


async def test_usage_is_the_servers_own_count(wire: Wire) -> None:
    """Input and output tokens are taken from the server's own fields (OpenAI: prompt_tokens and
    completion_tokens; Anthropic: input_tokens and output_tokens)."""
    wire.server.usage = (1234, 56)
    wire.server.reply_text("All quiet.")
    assert {"inputTokens": 1234, "outputTokens": 56} == (await wire.make().complete(HELLO, TOOLS)).usage


async def test_tool_call_becomes_a_tool_call(wire: Wire) -> None:
    """A tool call arrives decoded (arguments a dict) with the server's call id; text beside it is kept."""
    wire.server.reply_tool_call("sentinel_act", NOTIFY, text="Notifying.", call_id="call-9")
    reply = await wire.make().complete(HELLO, TOOLS)
    assert ("Notifying.", [ToolCall("call-9", "sentinel_act", NOTIFY)]) == (reply.text, reply.tool_calls)


async def test_several_tool_calls_keep_their_order(wire: Wire) -> None:
    """Parallel tool calls in one reply come back in the server's order."""
    wire.server.reply_tool_calls([("sentinel_history", {"limit": 5}), ("sentinel_act", NOTIFY)])
    reply = await wire.make().complete(HELLO, TOOLS)
    assert ["sentinel_history", "sentinel_act"] == [call.name for call in reply.tool_calls]


async def test_model_name_sent_is_the_specs(wire: Wire) -> None:
    """The request names the entry's model."""
    await wire.make(model="test-model-2").complete(HELLO, TOOLS)
    assert "test-model-2" == wire.server.requests[0]["model"]


async def test_no_tools_means_no_tools_key(wire: Wire) -> None:
    """A request without tools omits the key (some servers refuse an empty list)."""
    await wire.make().complete(HELLO, [])
    assert "tools" not in wire.server.requests[0]


async def test_requests_are_not_streamed(wire: Wire) -> None:
    """The backend asks for a whole reply (Ollama loses streamed tool calls)."""
    await wire.make().complete(HELLO, TOOLS)
    assert False is wire.server.requests[0].get("stream", False)


async def test_temperature_is_sent_when_set(wire: Wire) -> None:
    """The entry's temperature goes into the request."""
    await wire.make(temperature=0.3).complete(HELLO, TOOLS)
    assert 0.3 == wire.server.requests[0]["temperature"]


async def test_temperature_is_omitted_when_unset(wire: Wire) -> None:
    """Without a temperature the server's default applies."""
    await wire.make().complete(HELLO, TOOLS)
    assert "temperature" not in wire.server.requests[0]


@pytest.mark.parametrize(
    ("status", "retryable"),
    [(500, True), (503, True), (529, True), (429, True), (401, False), (400, False), (404, False)],
)
async def test_status_decides_retryable(wire: Wire, status: int, retryable: bool) -> None:
    """429 and 5xx (529: overloaded) may pass on another try; other 4xx are not retried."""
    wire.server.fail(status)
    with pytest.raises(ModelError) as caught:
        await wire.make().complete(HELLO, TOOLS)
    assert retryable == caught.value.retryable


async def test_error_names_entry_status_and_way_out_without_the_key(wire: Wire) -> None:
    """A 401 names the model entry, the status, the server's words and the key to check, and a key
    the server echoes is masked."""
    wire.server.fail(401, f"Incorrect API key provided: {API_KEY}")
    with pytest.raises(ModelError) as caught:
        await wire.make().complete(HELLO, TOOLS)
    expected = (
        f"model {wire.name!r} ({wire.model} at {wire.server.url}): HTTP 401: "
        f"Incorrect API key provided: ***; check models.{wire.name}.apiKey"
    )
    assert expected == str(caught.value)


async def test_connection_refused_is_retryable(wire: Wire) -> None:
    """Nobody listening is a retryable error."""
    with pytest.raises(ModelError) as caught:
        await wire.make(baseUrl=wire.refused_base()).complete(HELLO, TOOLS)
    assert caught.value.retryable is True


async def test_timeout_is_retryable(wire: Wire) -> None:
    """A server slower than timeoutMs gives a retryable error that says so."""
    wire.server.hang()
    with pytest.raises(ModelError) as caught:
        await wire.make(timeoutMs=200).complete(HELLO, TOOLS)
    assert (True, True) == (caught.value.retryable, "no answer within 0.2 s" in str(caught.value))


# -- the fake servers that ship for these tests ------------------------------------------------


async def test_exhausted_script_answers_done(wire: Wire) -> None:
    """With nothing scripted the fake server answers plain text "done"."""
    reply = await wire.make().complete(HELLO, TOOLS)
    assert "done" == reply.text


async def test_the_fake_answers_matching_requests_ahead_of_its_script(wire: Wire) -> None:
    """reply_text_when answers every request it matches, leaving the script for the others."""
    wire.server.reply_text_when(lambda body: "summarise" in str(body["messages"]), "a summary")
    wire.server.reply_text("scripted")
    backend = wire.make()
    asked = [{"role": "user", "content": "please summarise"}]
    texts = [(await backend.complete(m, TOOLS)).text for m in (asked, HELLO, asked)]
    assert ["a summary", "scripted", "a summary"] == texts


async def test_a_judge_question_is_one_completion_without_tools(wire: Wire) -> None:
    """A judge rule's call: system and user messages, no tools; answer_when computes the verdict text."""

    async def verdict(body: dict[str, Any]) -> str:
        return json.dumps({"violation": True, "confidence": 0.9, "reason": f"{len(body['messages'])} turns"})

    wire.server.answer_when(lambda body: "Rule:" in str(body["messages"]), verdict)
    asked = [{"role": "system", "content": "You judge."}, {"role": "user", "content": "Rule: read only"}]
    reply = await wire.make().complete(asked, [])
    assert ([], "tools" in wire.server.requests[0]) == (reply.tool_calls, False)
    assert reply.text is not None
    assert '"violation": true' in reply.text


async def test_the_fake_records_each_request_bodys_size(wire: Wire) -> None:
    """request_sizes holds the bytes of each body, so a test can check what went over the wire."""
    await wire.make().complete(HELLO, TOOLS)
    [size] = wire.server.request_sizes
    assert len(str(wire.server.requests[0]["messages"])) < size


# -- the registry, for every type --------------------------------------------------------------

ENTRIES: list[tuple[str, dict[str, Any], tuple[type, str, str, int]]] = [
    (
        "local",
        {"type": "openai", "model": "qwen2.5:7b", "maxTurns": 4},
        (OpenAIBackend, "local", "qwen2.5:7b", 4),
    ),
    (
        "claude",
        {"type": "anthropic", "model": "claude-haiku-4-5", "maxTurns": 4},
        (AnthropicBackend, "claude", "claude-haiku-4-5", 4),
    ),
    ("rules", {"type": "scripted"}, (ScriptedBackend, "rules", "scripted", 3)),
]
TYPES = [spec["type"] for _, spec, _ in ENTRIES]


def test_every_registered_type_is_covered() -> None:
    """The registry's model types are exactly the ones this suite builds."""
    assert set(TYPES) == set(MODULES)


@pytest.mark.parametrize(("name", "spec", "expected"), ENTRIES, ids=TYPES)
async def test_the_registry_builds_the_entrys_backend(
    name: str, spec: dict[str, Any], expected: tuple[type, str, str, int]
) -> None:
    """A ``models:`` entry's type picks its backend, with the entry's name, model and maxTurns."""
    backend = create_backend(name, SPECS.validate_python(spec))
    await backend.close()
    assert expected == (type(backend), backend.name, backend.model, backend.max_turns)


@pytest.mark.parametrize(("name", "spec"), [(n, s) for n, s, _ in ENTRIES], ids=TYPES)
async def test_close_may_be_called_twice(name: str, spec: dict[str, Any]) -> None:
    """close() releases the backend's connections and is safe to repeat."""
    backend = create_backend(name, SPECS.validate_python(spec))
    await backend.close()
    await backend.close()
    assert name == backend.name


def test_a_missing_backend_module_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """When a type's module is not in the build, the error names the model entry and the module."""
    monkeypatch.setitem(MODULES, "scripted", "sentinel_hooks.callbacks.backends.no_such_module")
    with pytest.raises(SentinelError, match="model 'rules': the scripted backend"):
        create_backend("rules", SPECS.validate_python({"type": "scripted"}))
