"""Strict JSON's nesting limit counts only the brackets outside strings, whatever the strings hold
(escaped quotes, escaped backslashes before a closing quote, brackets)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sentinel_hooks.core.strict_json import MAX_DEPTH, TOO_DEEP, InvalidJson, loads_strict

TRICKY = ['"[', "\\", '\\"{', "]]", 'a\\\\"[']


def nested(depth: int) -> Any:
    value: Any = TRICKY
    for level in range(depth - 1):
        value = [value, TRICKY[level % len(TRICKY)]] if level % 2 else {f'k"[{level}\\': value}
    return value


@pytest.mark.parametrize("depth", [MAX_DEPTH - 1, MAX_DEPTH])
def test_nesting_up_to_the_limit_is_read_whatever_the_strings_hold(depth: int) -> None:
    raw = json.dumps(nested(depth)).encode()
    assert nested(depth) == loads_strict(raw)


def test_nesting_past_the_limit_is_refused() -> None:
    with pytest.raises(InvalidJson, match=TOO_DEEP):
        loads_strict(json.dumps(nested(MAX_DEPTH + 1)).encode())


def test_brackets_inside_strings_do_not_count() -> None:
    raw = json.dumps(["[" * 500, "{" * 500, "\\" + '"' * 3]).encode()
    assert ["[" * 500, "{" * 500, '\\"""'] == loads_strict(raw)
