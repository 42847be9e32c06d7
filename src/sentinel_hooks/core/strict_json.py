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

import itertools
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
    result = dict(pairs)  # in C; only an object whose keys repeat is looked at key by key
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key!r}")
            seen.add(key)
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
    if not text.strip():
        raise InvalidJson(f"{what} is empty; send a JSON value")
    try:
        value = json.loads(text, object_pairs_hook=_pairs, parse_float=_float, parse_constant=_constant)
    except RecursionError as exc:  # the C parser stops at the interpreter's recursion limit
        raise InvalidJson(TOO_DEEP) from exc
    except ValueError as exc:
        raise InvalidJson(f"invalid JSON: {exc}") from exc
    if text.count("[") + text.count("{") > MAX_DEPTH and _too_deep(text):
        raise InvalidJson(TOO_DEEP)
    # a lone surrogate can only come from a \u escape: the text itself is strict UTF-8
    if "\\u" in text:
        _check_value(value, strings=True)
    return value


_BRACKET = re.compile(r"[\[\]{}]")  # one character class: linear on any text
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _too_deep(text: str) -> bool:
    """Whether the brackets of ``text``, valid JSON, nest deeper than ``MAX_DEPTH``, counted in C:
    with its escaped backslashes and quotes taken out, the pieces between its quotes alternate
    outside and inside strings, and only the brackets outside count (a character loop took
    1.0 ms for an Alertmanager notification of 50 alerts, 18 KB)."""
    plain = text.replace("\\\\", "").replace('\\"', "")
    steps = map(_STEP.__getitem__, _BRACKET.findall("".join(plain.split('"')[::2])))
    return max(itertools.accumulate(steps), default=0) > MAX_DEPTH
