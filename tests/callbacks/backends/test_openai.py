"""OpenAIBackend against a fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import pytest

from sentinel_hooks.callbacks.backends.base import ModelError, ModelReply, ToolCall
from sentinel_hooks.testing import FakeOpenAIServer
from tests.callbacks.backends.conftest import API_KEY, HELLO, TOOLS, MakeOpenAI, refused_url

NOTIFY = {"action": "notify", "message": "disk at 91% on db-1"}


async def test_text_reply_is_returned(openai_server: FakeOpenAIServer, make_openai: MakeOpenAI) -> None:
    """A plain text answer becomes the reply text, with the model name and usage the server reported."""
    openai_server.reply_text("All quiet.")
    reply = await make_openai().complete(HELLO, TOOLS)
    assert (
        ModelReply(text="All quiet.", model="qwen2.5:7b", usage={"inputTokens": 10, "outputTokens": 5})
        == reply
    )


async def test_tool_call_arguments_are_decoded(
    openai_server: FakeOpenAIServer, make_openai: MakeOpenAI
) -> None:
    """A tool call's JSON arguments arrive as a dict, with the server's call id."""
    openai_server.reply_tool_call("sentinel_act", NOTIFY, call_id="call_abc")
    reply = await make_openai().complete(HELLO, TOOLS)
    assert [ToolCall("call_abc", "sentinel_act", NOTIFY)] == reply.tool_calls


async def test_arguments_that_are_not_json_are_kept_raw(
    openai_server: FakeOpenAIServer, make_openai: MakeOpenAI
) -> None:
    """Broken JSON arguments stay the raw text, so the session can tell the model what was wrong."""
    openai_server.reply_tool_call("sentinel_act", '{"action": notify')
    reply = await make_openai().complete(HELLO, TOOLS)
    assert '{"action": notify' == reply.tool_calls[0].arguments


async def test_empty_arguments_are_an_empty_object(
    openai_server: FakeOpenAIServer, make_openai: MakeOpenAI
) -> None:
    """Small models send "" for a call without arguments; that means {}."""
    openai_server.reply_tool_call("sentinel_escalate", "")
    reply = await make_openai().complete(HELLO, TOOLS)
    assert {} == reply.tool_calls[0].arguments


async def test_tool_result_round_trip(openai_server: FakeOpenAIServer, make_openai: MakeOpenAI) -> None:
    """The next request carries the assistant's call and the tool result linked by the call id."""
    openai_server.reply_tool_call("sentinel_act", NOTIFY, call_id="call_7")
    backend = make_openai()
    first = await backend.complete(HELLO, TOOLS)
    result = {"role": "tool", "toolCallId": "call_7", "name": "sentinel_act", "content": '{"ok": true}'}
    await backend.complete([*HELLO, first.to_message(), result], TOOLS)
    assert [
        {"role": "system", "content": "You watch things."},
        {"role": "user", "content": "disk at 91%"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_7",
                    "type": "function",
                    "function": {
                        "name": "sentinel_act",
                        "arguments": '{"action": "notify", "message": "disk at 91% on db-1"}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_7", "content": '{"ok": true}'},
    ] == openai_server.requests[1]["messages"]


async def test_model_name_sent_is_the_specs(openai_server: FakeOpenAIServer, make_openai: MakeOpenAI) -> None:
    """The request names the entry's model."""
    await make_openai(model="llama3.1:8b").complete(HELLO, TOOLS)
    assert "llama3.1:8b" == openai_server.requests[0]["model"]


async def test_tools_are_offered_as_functions(
    openai_server: FakeOpenAIServer, make_openai: MakeOpenAI
) -> None:
    """Each tool is sent as {type: function, function: {name, description, parameters}}."""
    await make_openai().complete(HELLO, TOOLS)
    expected = [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in TOOLS
    ]
    assert expected == openai_server.requests[0]["tools"]


async def test_no_tools_means_no_tools_key(openai_server: FakeOpenAIServer, make_openai: MakeOpenAI) -> None:
    """A request without tools omits the key (some servers refuse an empty list)."""
    await make_openai().complete(HELLO, [])
    assert "tools" not in openai_server.requests[0]


async def test_requests_are_not_streamed(openai_server: FakeOpenAIServer, make_openai: MakeOpenAI) -> None:
    """Requests offering tools ask for a whole reply (Ollama loses streamed tool calls)."""
    await make_openai().complete(HELLO, TOOLS)
    assert False is openai_server.requests[0].get("stream", False)


async def test_temperature_is_sent_when_set(openai_server: FakeOpenAIServer, make_openai: MakeOpenAI) -> None:
    """The entry's temperature goes into the request."""
    await make_openai(temperature=0.2).complete(HELLO, TOOLS)
    assert 0.2 == openai_server.requests[0]["temperature"]


async def test_temperature_is_omitted_when_unset(
    openai_server: FakeOpenAIServer, make_openai: MakeOpenAI
) -> None:
    """Without a temperature the server's default applies."""
    await make_openai().complete(HELLO, TOOLS)
    assert "temperature" not in openai_server.requests[0]


async def test_api_key_is_the_bearer_token(openai_server: FakeOpenAIServer, make_openai: MakeOpenAI) -> None:
    """The entry's apiKey authenticates the request."""
    await make_openai().complete(HELLO, TOOLS)
    assert f"Bearer {API_KEY}" == openai_server.request_headers[0]["authorization"]


async def test_missing_api_key_sends_placeholder(
    openai_server: FakeOpenAIServer, make_openai: MakeOpenAI
) -> None:
    """Local servers need no key; the SDK still gets one, and it is not read from the environment."""
    await make_openai(apiKey=None).complete(HELLO, TOOLS)
    assert "Bearer none" == openai_server.request_headers[0]["authorization"]


@pytest.mark.parametrize(
    ("status", "retryable"), [(500, True), (503, True), (429, True), (401, False), (400, False), (404, False)]
)
async def test_status_decides_retryable(
    openai_server: FakeOpenAIServer, make_openai: MakeOpenAI, status: int, retryable: bool
) -> None:
    """429 and 5xx may pass on another try; other 4xx are configuration or request errors."""
    openai_server.fail(status)
    with pytest.raises(ModelError) as caught:
        await make_openai().complete(HELLO, TOOLS)
    assert retryable == caught.value.retryable


async def test_error_names_entry_status_and_way_out(
    openai_server: FakeOpenAIServer, make_openai: MakeOpenAI
) -> None:
    """A 401 names the model entry, the status, the server's words and the key to check."""
    openai_server.fail(401, "Incorrect API key provided")
    with pytest.raises(ModelError) as caught:
        await make_openai().complete(HELLO, TOOLS)
    expected = (
        f"model 'local' (qwen2.5:7b at {openai_server.url}): HTTP 401: Incorrect API key provided; "
        "check models.local.apiKey"
    )
    assert expected == str(caught.value)


async def test_error_never_shows_api_key(openai_server: FakeOpenAIServer, make_openai: MakeOpenAI) -> None:
    """A server that echoes the key in its error body does not get it into our message."""
    openai_server.fail(401, f"Incorrect API key provided: {API_KEY}")
    with pytest.raises(ModelError) as caught:
        await make_openai().complete(HELLO, TOOLS)
    assert API_KEY not in str(caught.value)


async def test_connection_refused_is_retryable(make_openai: MakeOpenAI) -> None:
    """Nobody listening is a retryable error."""
    with pytest.raises(ModelError) as caught:
        await make_openai(baseUrl=refused_url() + "/v1").complete(HELLO, TOOLS)
    assert True is caught.value.retryable


async def test_timeout_is_retryable(openai_server: FakeOpenAIServer, make_openai: MakeOpenAI) -> None:
    """A server slower than timeoutMs gives a retryable error that says so."""
    openai_server.hang()
    with pytest.raises(ModelError) as caught:
        await make_openai(timeoutMs=200).complete(HELLO, TOOLS)
    assert (True, True) == (caught.value.retryable, "no answer within 0.2 s" in str(caught.value))


async def test_exhausted_script_answers_done(
    openai_server: FakeOpenAIServer, make_openai: MakeOpenAI
) -> None:
    """With nothing scripted the fake server answers plain text "done"."""
    reply = await make_openai().complete(HELLO, TOOLS)
    assert "done" == reply.text


async def test_several_tool_calls_keep_their_order(
    openai_server: FakeOpenAIServer, make_openai: MakeOpenAI
) -> None:
    """Parallel tool calls in one reply come back in the server's order."""
    openai_server.reply_tool_calls([("sentinel_history", {"limit": 5}), ("sentinel_act", NOTIFY)])
    reply = await make_openai().complete(HELLO, TOOLS)
    assert ["sentinel_history", "sentinel_act"] == [call.name for call in reply.tool_calls]


async def test_the_fake_answers_matching_requests_ahead_of_its_script(
    openai_server: FakeOpenAIServer, make_openai: MakeOpenAI
) -> None:
    """reply_text_when answers every request it matches, leaving the script for the others."""
    openai_server.reply_text_when(lambda body: "summarise" in str(body["messages"]), "a summary")
    openai_server.reply_text("scripted")
    backend = make_openai()
    asked = [{"role": "user", "content": "please summarise"}]
    texts = [(await backend.complete(m, TOOLS)).text for m in (asked, HELLO, asked)]
    assert ["a summary", "scripted", "a summary"] == texts


async def test_the_fake_records_each_request_bodys_size(
    openai_server: FakeOpenAIServer, make_openai: MakeOpenAI
) -> None:
    """request_sizes holds the bytes of each body, so a test can check what went over the wire."""
    await make_openai().complete(HELLO, TOOLS)
    [size] = openai_server.request_sizes
    assert len(str(openai_server.requests[0]["messages"])) < size
