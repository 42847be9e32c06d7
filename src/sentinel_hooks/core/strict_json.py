"""JSON read strictly (SPEC.md §9 request hygiene), for every face that takes JSON from outside:
the HTTP API's bodies (``api.body``) and the messages of ``sentinel mcp`` over stdio.

Duplicate keys, nesting deeper than 100, numbers longer than 4,300 digits, ``NaN`` and
``±Infinity`` (which Python's json module reads but JSON does not have) and strings that are not
Unicode (lone surrogates, written as ``\\ud800``) are refused with ``InvalidJson`` saying what is
wrong. What a caller gets is therefore what can be stored and evaluated as sent: NaN would be
stored as null, a lone surrogate cannot be encoded, and of two values for one key one would be
dropped without a word.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 100
MAX_NUMBER_DIGITS = 4300
SURROGATE = re.compile(r"[\ud800-\udfff]")
TOO_DEEP = f"JSON nested deeper than {MAX_DEPTH} levels"


class InvalidJson(ValueError):
    """Text that is not strict JSON; the message says why, for people."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _float(text: str) -> float:
    if len(text) > MAX_NUMBER_DIGITS:
        raise ValueError(f"a number has more than {MAX_NUMBER_DIGITS} digits")
    return float(text)


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (numbers must be finite)")


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` is not Unicode: a lone surrogate from a JSON escape, or header bytes
    that were not UTF-8 (aiohttp hands those over as surrogate escapes)."""
    return SURROGATE.search(text) is not None


def _lone_surrogate(text: str) -> InvalidJson | None:
    found = SURROGATE.search(text)
    if found is None:
        return None
    escaped = f"\\u{ord(found.group()):04x}"
    return InvalidJson(f"invalid JSON: a string holds a lone surrogate ({escaped}), which is not Unicode")


def _check_value(value: Any, *, strings: bool) -> None:
    """Depth and (with ``strings``) the strings of a parsed value; iterative, so deep input
    cannot exhaust the stack."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if strings and isinstance(node, str):
            problem = _lone_surrogate(node)
            if problem is not None:
                raise problem
        elif isinstance(node, dict | list):
            if depth > MAX_DEPTH:
                raise InvalidJson(TOO_DEEP)
            children = [*node, *node.values()] if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)


def loads_strict(raw: bytes, what: str = "the body") -> Any:
    """Parse ``raw`` with the hygiene rules; ``InvalidJson`` explains what is wrong (``what``
    names the text in the message: ``the body``, ``the message``)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidJson(f"{what} is not UTF-8: {exc.reason}") from exc
    if text.count("[") + text.count("{") > MAX_DEPTH and _too_deep_fast(text):
        raise InvalidJson(TOO_DEEP)
    if not text.strip():
        raise InvalidJson(f"{what} is empty; send a JSON value")
    try:
        value = json.loads(text, object_pairs_hook=_pairs, parse_float=_float, parse_constant=_constant)
    except RecursionError as exc:
        raise InvalidJson(TOO_DEEP) from exc
    except ValueError as exc:
        raise InvalidJson(f"invalid JSON: {exc}") from exc
    # a lone surrogate can only come from a \u escape: the text itself is strict UTF-8
    _check_value(value, strings="\\u" in text)
    return value


def _too_deep_fast(text: str) -> bool:
    """A character scan (strings skipped) so pathological nesting never reaches the parser."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif char in "]}":
            depth -= 1
    return False
