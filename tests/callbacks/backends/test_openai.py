"""OpenAIBackend's chat-completions request shapes, against a fake OpenAI-compatible server on 127.0.0.1.

What every backend does (replies, errors, timeouts) is in tests/contract/test_model_backends.py.
"""

from __future__ import annotations

from sentinel_hooks.testing import FakeOpenAIServer
from tests.callbacks.backends.conftest import API_KEY, HELLO, TOOLS, MakeOpenAI

NOTIFY = {"action": "notify", "message": "disk at 91% on db-1"}


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
