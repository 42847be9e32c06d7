"""The neutral transcript → Anthropic Messages translation (no server needed)."""

from __future__ import annotations

from typing import Any

from sentinel_hooks.callbacks.backends.anthropic import to_anthropic_messages


def tool_result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "toolCallId": call_id, "name": "sentinel_act", "content": content}


def test_consecutive_tool_results_share_one_user_turn() -> None:
    """Two tool results after one assistant turn become one user message with two tool_result blocks."""
    calls = [
        {"id": "a", "name": "sentinel_act", "arguments": {}},
        {"id": "b", "name": "sentinel_act", "arguments": {}},
    ]
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "toolCalls": calls},
        tool_result("a", "1"),
        tool_result("b", "2"),
    ]
    assert [
        {"type": "tool_result", "tool_use_id": "a", "content": "1"},
        {"type": "tool_result", "tool_use_id": "b", "content": "2"},
    ] == to_anthropic_messages(messages)[2]["content"]


def test_user_text_after_tool_result_joins_the_same_turn() -> None:
    """A user message right after a tool result is merged into it, so turns alternate."""
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "toolCalls": [{"id": "a", "name": "sentinel_act", "arguments": {}}],
        },
        tool_result("a", "1"),
        {"role": "user", "content": "and now?"},
    ]
    assert ["user", "assistant", "user"] == [m["role"] for m in to_anthropic_messages(messages)]


def test_assistant_text_and_tool_use_share_one_turn() -> None:
    """An assistant message with text and a call becomes a text block then a tool_use block."""
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "On it.",
            "toolCalls": [{"id": "a", "name": "x", "arguments": {"k": 1}}],
        },
    ]
    assert [
        {"type": "text", "text": "On it."},
        {"type": "tool_use", "id": "a", "name": "x", "input": {"k": 1}},
    ] == to_anthropic_messages(messages)[1]["content"]


def test_empty_assistant_turn_is_dropped() -> None:
    """An assistant message with neither text nor calls is not sent (the API refuses empty turns)."""
    messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": None, "toolCalls": []}]
    assert 1 == len(to_anthropic_messages(messages))


def test_raw_text_arguments_are_wrapped_in_an_object() -> None:
    """Arguments kept as raw text (not JSON) are sent as {"_raw": text}; tool_use input must be an object."""
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "toolCalls": [{"id": "a", "name": "x", "arguments": "{oops"}]},
    ]
    assert {"_raw": "{oops"} == to_anthropic_messages(messages)[1]["content"][0]["input"]


def test_json_text_arguments_are_decoded() -> None:
    """Arguments stored as JSON text are sent as the object they encode."""
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "toolCalls": [{"id": "a", "name": "x", "arguments": '{"k": 2}'}],
        },
    ]
    assert {"k": 2} == to_anthropic_messages(messages)[1]["content"][0]["input"]
