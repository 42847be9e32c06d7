"""Tool calls written as JSON text by small models are recovered; JSON that is data is not."""

from __future__ import annotations

from typing import Any

import pytest

from sentinel_hooks.callbacks.backends.base import ModelReply, ToolCall
from sentinel_hooks.callbacks.backends.recovery import recover_tool_calls

NAMES = ["sentinel_act", "sentinel_escalate", "sentinel_history"]
NOTIFY = {"action": "notify", "message": "disk full"}
NOTIFY_JSON = '{"action": "notify", "message": "disk full"}'

RECOVERED: list[tuple[str, str, list[tuple[str, dict[str, Any] | str]]]] = [
    (
        "name and arguments",
        '{"name": "sentinel_act", "arguments": ' + NOTIFY_JSON + "}",
        [("sentinel_act", NOTIFY)],
    ),
    ("tool and args", '{"tool": "sentinel_act", "args": ' + NOTIFY_JSON + "}", [("sentinel_act", NOTIFY)]),
    (
        "name and parameters",
        '{"name": "sentinel_act", "parameters": ' + NOTIFY_JSON + "}",
        [("sentinel_act", NOTIFY)],
    ),
    (
        "tool_name and input",
        '{"tool_name": "sentinel_act", "input": ' + NOTIFY_JSON + "}",
        [("sentinel_act", NOTIFY)],
    ),
    (
        "openai function shape, arguments as JSON text",
        '{"type": "function", "function": {"name": "sentinel_act", "arguments": "'
        + NOTIFY_JSON.replace('"', '\\"')
        + '"}}',
        [("sentinel_act", NOTIFY)],
    ),
    (
        "json fence inside prose",
        "I will notify the team now.\n```json\n"
        + '{"name": "sentinel_act", "arguments": '
        + NOTIFY_JSON
        + "}\n```\nDone.",
        [("sentinel_act", NOTIFY)],
    ),
    (
        "tool_call tags",
        '<tool_call>\n{"name": "sentinel_escalate", "arguments": {"reason": "odd"}}\n</tool_call>',
        [("sentinel_escalate", {"reason": "odd"})],
    ),
    (
        "two calls in the text",
        '{"name": "sentinel_history", "arguments": {"limit": 5}} then '
        '{"name": "sentinel_escalate", "arguments": {"reason": "odd"}}',
        [("sentinel_history", {"limit": 5}), ("sentinel_escalate", {"reason": "odd"})],
    ),
    (
        "a list of calls",
        '[{"name": "sentinel_history", "arguments": {}}, {"name": "sentinel_act", "arguments": '
        + NOTIFY_JSON
        + "}]",
        [("sentinel_history", {}), ("sentinel_act", NOTIFY)],
    ),
    (
        "a tool_calls wrapper",
        '{"tool_calls": [{"function": {"name": "sentinel_act", "arguments": ' + NOTIFY_JSON + "}}]}",
        [("sentinel_act", NOTIFY)],
    ),
    (
        "a call inside an unknown wrapper",
        '{"response": {"name": "sentinel_act", "arguments": ' + NOTIFY_JSON + "}}",
        [("sentinel_act", NOTIFY)],
    ),
    ("no arguments key", '{"name": "sentinel_history"}', [("sentinel_history", {})]),
    ("null arguments", '{"name": "sentinel_history", "arguments": null}', [("sentinel_history", {})]),
    (
        "arguments text that is not JSON is kept raw",
        '{"name": "sentinel_act", "arguments": "notify: disk full"}',
        [("sentinel_act", "notify: disk full")],
    ),
    (
        "a broken object before a good one",
        '{"name": "sentinel_act", "arguments": {"action": } and '
        '{"name": "sentinel_history", "arguments": {}}',
        [("sentinel_history", {})],
    ),
]

NOT_RECOVERED: list[tuple[str, str]] = [
    ("no JSON at all", "Everything looks fine, nothing to report."),
    ("unknown tool name", '{"name": "send_email", "arguments": {"to": "ops"}}'),
    ("data that has a name", '{"name": "disk", "usedPct": 91}'),
    ("a tool name among data keys", '{"name": "sentinel_act", "value": 3, "unit": "%"}'),
    ("plain data object", '```json\n{"status": "ok", "count": 3}\n```'),
    ("arguments that are a list", '{"name": "sentinel_act", "arguments": ["notify"]}'),
    ("two name keys", '{"name": "sentinel_act", "tool": "sentinel_history", "arguments": {}}'),
    ("truncated JSON", '{"name": "sentinel_act", "arguments": {"action": "notify"'),
    ("a list of strings", '["sentinel_act", "sentinel_history"]'),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in RECOVERED], ids=[c[0] for c in RECOVERED])
def test_tool_calls_in_text_are_recovered(
    text: str, expected: list[tuple[str, dict[str, Any] | str]]
) -> None:
    """Every call-shaped JSON value naming an offered tool becomes a ToolCall, in order."""
    reply = recover_tool_calls(ModelReply(text=text, model="m"), NAMES)
    assert expected == [(call.name, call.arguments) for call in reply.tool_calls]


@pytest.mark.parametrize("text", [c[1] for c in NOT_RECOVERED], ids=[c[0] for c in NOT_RECOVERED])
def test_text_that_is_not_a_call_is_left_alone(text: str) -> None:
    """Unknown tools, data objects and broken JSON give back the reply unchanged."""
    reply = ModelReply(text=text, model="m")
    assert reply == recover_tool_calls(reply, NAMES)


def test_recovered_ids_are_numbered() -> None:
    """Recovered calls get ids recovered-1, recovered-2 … in order."""
    text = '{"name": "sentinel_history"} {"name": "sentinel_history", "arguments": {"limit": 2}}'
    reply = recover_tool_calls(ModelReply(text=text), NAMES)
    assert ["recovered-1", "recovered-2"] == [call.id for call in reply.tool_calls]


def test_prose_around_the_call_is_kept_without_the_json() -> None:
    """The recovered JSON and its now-empty fence leave the text; the prose stays."""
    text = 'Notifying.\n```json\n{"name": "sentinel_act", "arguments": ' + NOTIFY_JSON + "}\n```\nThanks."
    reply = recover_tool_calls(ModelReply(text=text), NAMES)
    assert "Notifying.\n\nThanks." == reply.text


def test_text_that_was_only_the_call_becomes_none() -> None:
    """A reply that was nothing but the call has no text left."""
    reply = recover_tool_calls(ModelReply(text='{"name": "sentinel_history"}'), NAMES)
    assert None is reply.text


def test_model_and_usage_are_kept() -> None:
    """Recovery changes text and tool calls only."""
    reply = ModelReply(text='{"name": "sentinel_history"}', model="qwen", usage={"inputTokens": 3})
    recovered = recover_tool_calls(reply, NAMES)
    assert ("qwen", {"inputTokens": 3}) == (recovered.model, recovered.usage)


def test_reply_with_real_tool_calls_is_unchanged() -> None:
    """When the model used the API, JSON in its text is not a second call."""
    reply = ModelReply(
        text='{"name": "sentinel_history"}', tool_calls=[ToolCall("c1", "sentinel_act", NOTIFY)]
    )
    assert reply == recover_tool_calls(reply, NAMES)


def test_nothing_is_recovered_when_no_tools_were_offered() -> None:
    """A call is only recovered for a tool that was offered."""
    reply = ModelReply(text='{"name": "sentinel_history"}')
    assert reply == recover_tool_calls(reply, [])


def test_absurdly_deep_nesting_is_not_an_error() -> None:
    """Text nested deeper than the JSON decoder can go is simply not a call."""
    reply = ModelReply(text="[" * 2000)
    assert reply == recover_tool_calls(reply, NAMES)
