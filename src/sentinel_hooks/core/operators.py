"""The comparisons of JSON values that condition operators are made of (SPEC §4).

Equality without coercion (``1 != "1"``, ``True != 1``) but with ``100 == 100.0``; the number a
value holds for the numeric operators (exact, none for anything that is not a number); RE2
search; change as canonical JSON. Every function takes arbitrary JSON (and :data:`MISSING`) and
never raises: deep nesting is walked with an explicit stack, numbers go through
:mod:`sentinel_hooks.canonical`. What each operator means, built from these, is
:mod:`sentinel_hooks.core.checks`'.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any, Protocol

from sentinel_hooks.canonical import (
    ExactNumber,
    canonical_json,
    parse_number,
    to_number,
)
from sentinel_hooks.core.paths import MISSING

__all__ = [
    "Searchable",
    "as_number",
    "changed",
    "json_equal",
    "regex_search",
]


class Searchable(Protocol):
    """A compiled regular expression (an RE2 pattern)."""

    def search(self, text: str) -> object | None: ...


def _kind(value: Any) -> str:
    """The JSON type of a value; NaN/infinities are ``nonfinite``, non-JSON objects ``other``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "number"
    if isinstance(value, float):
        return "number" if math.isfinite(value) else "nonfinite"
    if isinstance(value, Decimal):
        return "number" if value.is_finite() else "nonfinite"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "other"


def json_equal(left: Any, right: Any) -> bool:
    """Deep equality of JSON values with no coercion; numbers compare by exact value.

    :data:`MISSING` equals nothing, not even itself. Of the non-JSON values, infinities equal
    the same infinity, NaN equals nothing, other objects equal only themselves.
    """
    pending: list[tuple[Any, Any]] = [(left, right)]
    while pending:
        first, second = pending.pop()
        if first is MISSING or second is MISSING:
            return False
        kind = _kind(first)
        if kind != _kind(second):
            return False
        if kind == "array":
            if len(first) != len(second):
                return False
            pending.extend(zip(first, second, strict=True))
        elif kind == "object":
            if first.keys() != second.keys():
                return False
            pending.extend((first[key], second[key]) for key in first)
        elif kind == "number":
            if not _same_number(first, second):
                return False
        elif kind == "nonfinite":
            if _is_nan(first) or _is_nan(second) or first != second:
                return False
        elif kind == "other":
            if first is not second:
                return False
        elif first != second:  # null, boolean, string
            return False
    return True


def _is_nan(value: float | Decimal) -> bool:
    """NaN never equals anything (and a signalling Decimal NaN must not be compared)."""
    return value.is_nan() if isinstance(value, Decimal) else math.isnan(value)


def _same_number(first: Any, second: Any) -> bool:
    """Exact equality of two finite JSON numbers."""
    if type(first) is type(second) and type(first) in (int, float):
        return bool(first == second)  # exact in Python for two ints or two floats
    return to_number(first) == to_number(second)


def as_number(value: Any) -> ExactNumber | None:
    """The number a value holds for the numeric operators: a JSON number or a numeric string."""
    if isinstance(value, str):
        return parse_number(value)
    return to_number(value)


def regex_search(pattern: Searchable | None, actual: Any) -> bool:
    """Unanchored search of a string; lone surrogates (not UTF-8) are searched as U+FFFD."""
    if pattern is None or not isinstance(actual, str):
        return False
    try:
        return pattern.search(actual) is not None
    except UnicodeEncodeError:  # RE2 searches UTF-8, which cannot hold a lone surrogate
        return pattern.search(_without_surrogates(actual)) is not None


def _without_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD."""
    return "".join("\ufffd" if "\ud800" <= char <= "\udfff" else char for char in text)


def changed(actual: Any, before: Any) -> bool:
    """Whether the value differs, as canonical JSON, from the one before; missing equals null."""
    now_text = canonical_json(None if actual is MISSING else actual)
    before_text = canonical_json(None if before is MISSING else before)
    return now_text != before_text
