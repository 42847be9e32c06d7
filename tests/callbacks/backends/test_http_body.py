"""The model request body: members encoded once (the tools) joined to the rest."""

from __future__ import annotations

import json
from typing import Any

from sentinel_hooks.callbacks.backends.base import ToolSpec
from sentinel_hooks.callbacks.backends.http import EncodedTools, encode_body
from sentinel_hooks.callbacks.backends.openai import to_openai_tools

SPEC = ToolSpec("look", "Looks é.", {"type": "object", "properties": {"at": {"type": "string"}}})
OTHER = ToolSpec("other", "Other.", {"type": "object"})


def test_encoded_members_follow_the_body_s_own() -> None:
    """The body and the encoded members decode to one object, the encoded ones last."""
    data = encode_body({"model": "m", "n": [1, "é"]}, {"tools": '[{"a": 1}]'})
    assert {"model": "m", "n": [1, "é"], "tools": [{"a": 1}]} == json.loads(data)
    assert ["model", "n", "tools"] == list(json.loads(data))


def test_an_empty_body_with_encoded_members_is_valid_json() -> None:
    """No member of its own: the encoded members alone."""
    assert {"tools": []} == json.loads(encode_body({}, {"tools": "[]"}))


def test_without_encoded_members_the_body_is_plain_json() -> None:
    """Nothing encoded: exactly ``json.dumps`` of the body."""
    body: dict[str, Any] = {"model": "m", "stream": False}
    assert json.dumps(body).encode() == encode_body(body, {})


def test_tools_are_encoded_once_per_list_of_the_same_specs() -> None:
    """The same specs give the same text object back; the text is the converted list's JSON."""
    calls: list[int] = []

    def convert(tools: list[ToolSpec]) -> list[dict[str, Any]]:
        calls.append(len(tools))
        return to_openai_tools(tools)

    cache = EncodedTools(convert)
    first = cache.text([SPEC, OTHER])
    assert first is cache.text([SPEC, OTHER])
    assert to_openai_tools([SPEC, OTHER]) == json.loads(first)
    assert to_openai_tools([OTHER]) == json.loads(cache.text([OTHER]))
    assert [2, 1] == calls


def test_a_full_tools_cache_starts_again() -> None:
    """Past ``size`` lists the cache forgets them all, and still answers right."""
    cache = EncodedTools(to_openai_tools, size=1)
    cache.text([SPEC])
    assert to_openai_tools([OTHER]) == json.loads(cache.text([OTHER]))
    assert to_openai_tools([SPEC]) == json.loads(cache.text([SPEC]))
