"""AnthropicBackend's Messages request shapes, against a fake Anthropic Messages server on 127.0.0.1.

What every backend does (replies, errors, timeouts) is in tests/contract/test_model_backends.py.
"""

from __future__ import annotations

from sentinel_hooks.testing import FakeAnthropicServer
from tests.callbacks.backends.conftest import API_KEY, HELLO, TOOLS, MakeAnthropic

NOTIFY = {"action": "notify", "message": "disk at 91% on db-1"}


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


async def test_requests_carry_a_max_tokens_bound(
    anthropic_server: FakeAnthropicServer, make_anthropic: MakeAnthropic
) -> None:
    """The Messages API requires max_tokens; the backend sends 1024."""
    await make_anthropic().complete(HELLO, TOOLS)
    assert 1024 == anthropic_server.requests[0]["max_tokens"]


async def test_tools_are_offered_with_input_schema(
    anthropic_server: FakeAnthropicServer, make_anthropic: MakeAnthropic
) -> None:
    """Each tool is sent as {name, description, input_schema}."""
    await make_anthropic().complete(HELLO, TOOLS)
    expected = [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in TOOLS]
    assert expected == anthropic_server.requests[0]["tools"]


async def test_api_key_is_sent(anthropic_server: FakeAnthropicServer, make_anthropic: MakeAnthropic) -> None:
    """The entry's apiKey authenticates the request (x-api-key in older SDKs, a bearer token in newer)."""
    await make_anthropic().complete(HELLO, TOOLS)
    headers = anthropic_server.request_headers[0]
    sent = {headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer ")}
    assert API_KEY in sent
