"""AnthropicBackend against a fake Anthropic Messages server on 127.0.0.1."""

from __future__ import annotations

import pytest

from sentinel_hooks.callbacks.backends.base import ModelError, ModelReply, ToolCall
from sentinel_hooks.testing import FakeAnthropicServer
from tests.callbacks.backends.conftest import API_KEY, HELLO, TOOLS, MakeAnthropic, refused_url

NOTIFY = {"action": "notify", "message": "disk at 91% on db-1"}


async def test_text_reply_is_returned(
    anthropic_server: FakeAnthropicServer, make_anthropic: MakeAnthropic
) -> None:
    """Text blocks become the reply text, with the model name and usage the server reported."""
    anthropic_server.reply_text("All quiet.")
    reply = await make_anthropic().complete(HELLO, TOOLS)
    expected = ModelReply(
        text="All quiet.", model="claude-haiku-4-5", usage={"inputTokens": 10, "outputTokens": 5}
    )
    assert expected == reply


async def test_tool_use_becomes_tool_call(
    anthropic_server: FakeAnthropicServer, make_anthropic: MakeAnthropic
) -> None:
    """A tool_use block becomes a ToolCall with its id, name and input; text beside it is kept."""
    anthropic_server.reply_tool_call("sentinel_act", NOTIFY, text="Notifying.", call_id="toolu_9")
    reply = await make_anthropic().complete(HELLO, TOOLS)
    assert ("Notifying.", [ToolCall("toolu_9", "sentinel_act", NOTIFY)]) == (reply.text, reply.tool_calls)


async def test_tool_result_round_trip(
    anthropic_server: FakeAnthropicServer, make_anthropic: MakeAnthropic
) -> None:
    """The next request has the tool_use block and a user tool_result linked by its id."""
    anthropic_server.reply_tool_call("sentinel_act", NOTIFY, call_id="toolu_7")
    backend = make_anthropic()
    first = await backend.complete(HELLO, TOOLS)
    result = {"role": "tool", "toolCallId": "toolu_7", "name": "sentinel_act", "content": '{"ok": true}'}
    await backend.complete([*HELLO, first.to_message(), result], TOOLS)
    assert [
        {"role": "user", "content": [{"type": "text", "text": "disk at 91%"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_7", "name": "sentinel_act", "input": NOTIFY}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_7", "content": '{"ok": true}'}],
        },
    ] == anthropic_server.requests[1]["messages"]


async def test_system_messages_go_to_system(
    anthropic_server: FakeAnthropicServer, make_anthropic: MakeAnthropic
) -> None:
    """System messages are joined into the system parameter."""
    messages = [{"role": "system", "content": "One."}, {"role": "system", "content": "Two."}, *HELLO[1:]]
    await make_anthropic().complete(messages, TOOLS)
    assert "One.\n\nTwo." == anthropic_server.requests[0]["system"]


async def test_model_name_sent_is_the_specs(
    anthropic_server: FakeAnthropicServer, make_anthropic: MakeAnthropic
) -> None:
    """The request names the entry's model, with a max_tokens bound."""
    await make_anthropic(model="claude-test-model").complete(HELLO, TOOLS)
    request = anthropic_server.requests[0]
    assert ("claude-test-model", 1024) == (request["model"], request["max_tokens"])


async def test_tools_are_offered_with_input_schema(
    anthropic_server: FakeAnthropicServer, make_anthropic: MakeAnthropic
) -> None:
    """Each tool is sent as {name, description, input_schema}."""
    await make_anthropic().complete(HELLO, TOOLS)
    expected = [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in TOOLS]
    assert expected == anthropic_server.requests[0]["tools"]


async def test_requests_are_not_streamed(
    anthropic_server: FakeAnthropicServer, make_anthropic: MakeAnthropic
) -> None:
    """The backend asks for a whole reply."""
    await make_anthropic().complete(HELLO, TOOLS)
    assert False is anthropic_server.requests[0].get("stream", False)


async def test_temperature_is_sent_when_set(
    anthropic_server: FakeAnthropicServer, make_anthropic: MakeAnthropic
) -> None:
    """The entry's temperature goes into the request."""
    await make_anthropic(temperature=0.3).complete(HELLO, TOOLS)
    assert 0.3 == anthropic_server.requests[0]["temperature"]


async def test_api_key_is_sent(anthropic_server: FakeAnthropicServer, make_anthropic: MakeAnthropic) -> None:
    """The entry's apiKey authenticates the request (x-api-key in older SDKs, a bearer token in newer)."""
    await make_anthropic().complete(HELLO, TOOLS)
    headers = anthropic_server.request_headers[0]
    sent = {headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer ")}
    assert API_KEY in sent


@pytest.mark.parametrize(
    ("status", "retryable"), [(500, True), (529, True), (429, True), (401, False), (400, False)]
)
async def test_status_decides_retryable(
    anthropic_server: FakeAnthropicServer, make_anthropic: MakeAnthropic, status: int, retryable: bool
) -> None:
    """429, 5xx and 529 (overloaded) may pass on another try; other 4xx are not retried."""
    anthropic_server.fail(status)
    with pytest.raises(ModelError) as caught:
        await make_anthropic().complete(HELLO, TOOLS)
    assert retryable == caught.value.retryable


async def test_error_names_entry_and_status_without_key(
    anthropic_server: FakeAnthropicServer, make_anthropic: MakeAnthropic
) -> None:
    """A 401 names the model entry, the status and the way out, and masks an echoed key."""
    anthropic_server.fail(401, f"invalid x-api-key {API_KEY}")
    with pytest.raises(ModelError) as caught:
        await make_anthropic().complete(HELLO, TOOLS)
    expected = (
        f"model 'claude' (claude-haiku-4-5 at {anthropic_server.url}): HTTP 401: invalid x-api-key ***; "
        "check models.claude.apiKey"
    )
    assert expected == str(caught.value)


async def test_connection_refused_is_retryable(make_anthropic: MakeAnthropic) -> None:
    """Nobody listening is a retryable error."""
    with pytest.raises(ModelError) as caught:
        await make_anthropic(baseUrl=refused_url()).complete(HELLO, TOOLS)
    assert True is caught.value.retryable


async def test_timeout_is_retryable(
    anthropic_server: FakeAnthropicServer, make_anthropic: MakeAnthropic
) -> None:
    """A server slower than timeoutMs gives a retryable error that says so."""
    anthropic_server.hang()
    with pytest.raises(ModelError) as caught:
        await make_anthropic(timeoutMs=200).complete(HELLO, TOOLS)
    assert (True, True) == (caught.value.retryable, "no answer within 0.2 s" in str(caught.value))
