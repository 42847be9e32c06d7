"""Recovery of tool calls that a small model wrote as JSON text instead of calling the tool.

Local models (7B-class on Ollama, llama.cpp) often answer a tool-calling request with prose
plus a JSON object such as ``{"name": "sentinel_act", "arguments": {...}}``, sometimes in a
```` ```json ```` fence, inside ``<tool_call>`` tags, as a list, or in the OpenAI wire shape
``{"function": {"name": ..., "arguments": "<json text>"}}``. This module finds such objects and
turns them into ``ToolCall``s so the session can run them as if the model had used the API.

Only names of tools that were offered count, and an object is a call only when all its keys
belong to the call shape (a name key, at most one arguments key, ``type``, ``id``): a JSON
object that is just data (``{"name": "disk", "usedPct": 91}``) is left alone. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import replace
from typing import Any

from sentinel_hooks.callbacks.backends.base import ModelReply, ToolCall

NAME_KEYS = ("name", "tool", "tool_name", "function")
ARGUMENT_KEYS = ("arguments", "args", "parameters", "params", "input")
EXTRA_KEYS = frozenset({"type", "id"})
WRAPPER_KEYS = ("tool_calls", "calls", "tool_call", "function_call")
RECOVERED_ID = "recovered-{}"
MAX_DECODE_ATTEMPTS = 1000  # bounds the work on pathological text (``[[[[…``)

_EMPTY_WRAPPERS = re.compile(r"```[A-Za-z]*\s*```|<tool_call>\s*</tool_call>|<tools>\s*</tools>")
_DECODER = json.JSONDecoder()

Call = tuple[str, dict[str, Any] | str]


def recover_tool_calls(reply: ModelReply, tool_names: Collection[str]) -> ModelReply:
    """``reply`` with tool calls recovered from its text, or ``reply`` itself when there are none.

    A reply that already has tool calls, or no text, is returned unchanged. Recovered calls get
    ids ``recovered-1``, ``recovered-2`` … in the order they appear; their JSON is removed from
    the text (``None`` when nothing else is left).
    """
    if reply.tool_calls or not reply.text or not tool_names:
        return reply
    names = frozenset(tool_names)
    calls, spans = _scan(reply.text, names)
    if not calls:
        return reply
    tool_calls = [
        ToolCall(id=RECOVERED_ID.format(n), name=name, arguments=arguments)
        for n, (name, arguments) in enumerate(calls, start=1)
    ]
    return replace(reply, text=_remaining_text(reply.text, spans), tool_calls=tool_calls)


def _scan(text: str, names: frozenset[str]) -> tuple[list[Call], list[tuple[int, int]]]:
    """Every call-shaped JSON value in ``text``, with the spans it occupies."""
    calls: list[Call] = []
    spans: list[tuple[int, int]] = []
    index = 0
    attempts = 0
    while index < len(text) and attempts < MAX_DECODE_ATTEMPTS:
        if text[index] not in "{[":
            index += 1
            continue
        attempts += 1
        try:
            value, end = _DECODER.raw_decode(text, index)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: absurdly deep nesting
            index += 1
            continue
        found = _calls_in(value, names)
        if found:
            calls.extend(found)
            spans.append((index, end))
            index = end
        else:
            index += 1  # look inside: a wrapper we do not know may still hold a call
    return calls, spans


def _calls_in(value: Any, names: frozenset[str]) -> list[Call]:
    """The calls ``value`` stands for: one call, a list of calls, or a wrapper of calls; else ``[]``."""
    if isinstance(value, list):
        found = [_calls_in(item, names) for item in value]
        return [call for calls in found for call in calls] if value and all(found) else []
    if not isinstance(value, dict):
        return []
    call = _as_call(value, names)
    if call is not None:
        return [call]
    keys = set(value) - EXTRA_KEYS
    if len(keys) == 1 and (key := keys.pop()) in WRAPPER_KEYS:
        return _calls_in(value[key], names)
    return []


def _as_call(value: dict[str, Any], names: frozenset[str]) -> Call | None:
    """``(name, arguments)`` when ``value`` is exactly a call of an offered tool."""
    function = value.get("function")
    if isinstance(function, dict) and set(value) - EXTRA_KEYS == {"function"}:
        return _as_call(function, names)
    name_keys = [key for key in NAME_KEYS if isinstance(value.get(key), str)]
    argument_keys = [key for key in ARGUMENT_KEYS if key in value]
    if len(name_keys) != 1 or len(argument_keys) > 1:
        return None
    if set(value) - EXTRA_KEYS - {*name_keys, *argument_keys}:
        return None  # other keys: this object is data, not a call
    name = value[name_keys[0]]
    if name not in names:
        return None
    arguments = _arguments(value[argument_keys[0]] if argument_keys else None)
    return None if arguments is None else (name, arguments)


def _arguments(raw: Any) -> dict[str, Any] | str | None:
    """Arguments as a dict; JSON text decoded; text that is not a JSON object kept raw."""
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            decoded = json.loads(raw)
        except json.JSONDecodeError:
            return raw
        return decoded if isinstance(decoded, dict) else raw
    return None


def _remaining_text(text: str, spans: list[tuple[int, int]]) -> str | None:
    """``text`` without the recovered JSON and the fences or tags left empty around it."""
    pieces: list[str] = []
    start = 0
    for begin, end in spans:
        pieces.append(text[start:begin])
        start = end
    pieces.append(text[start:])
    rest = _EMPTY_WRAPPERS.sub("", "".join(pieces)).strip()
    return rest or None
