"""How template values read as text, and how big they may grow.

Inside text, every value that is not a string reads as compact JSON (``null``, ``true``,
``{"a":1}``) — the same rule for ``{{ }}`` output, ``${…}`` interpolation, ``~`` and the
``string``/``join`` filters. And no template may build a string over 64 KiB, a list over
64 Ki items or an integer over 4300 digits: the checks here run *before* an operation
allocates (``'x' * 10**9`` is refused, not attempted).
"""

from __future__ import annotations

import json
import types
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final, TypeVar

from jinja2.exceptions import SecurityError
from jinja2.runtime import Undefined

from sentinel_hooks.canonical import canonical_json

MAX_VALUE_SIZE: Final = 64 * 1024
"""64 KiB: the largest string (UTF-8 bytes) or list (items) a template may build or render."""

MAX_INT_DIGITS: Final = 4300
"""Largest integer arithmetic may build (CPython's default int ↔ str limit)."""

_DIGITS_PER_BIT: Final = 0.30103
_T = TypeVar("_T")


class TemplateLimitError(SecurityError):
    """A template tried to build a value over :data:`MAX_VALUE_SIZE` or loop too long."""


def to_json(value: Any, *, indent: int | None = None) -> str:
    """Compact JSON (insertion order kept, non-ASCII kept) for objects and arrays in text."""
    separators = (",", ":") if indent is None else (",", ": ")
    return json.dumps(value, ensure_ascii=False, separators=separators, indent=indent, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, Undefined):
        str(value)  # StrictUndefined raises the undefined error here
    if isinstance(value, types.GeneratorType):
        return list(value)
    if isinstance(value, Decimal) and value.is_finite():
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(f"a {type(value).__name__} cannot be rendered as JSON")


def to_text(value: Any) -> str:
    """How a value reads inside text: JSON for everything that is not already a string."""
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, bool | int | float | Mapping | list | tuple):
        return check_size(to_json(value))
    if isinstance(value, types.GeneratorType):
        return check_size(to_json(list(value)))
    if isinstance(value, Decimal) and value.is_finite():
        return canonical_json(value)
    return str(value)  # an Undefined raises; Jinja's own objects read as themselves


def check_size(value: _T) -> _T:
    """Refuse a string or list over :data:`MAX_VALUE_SIZE`; return it otherwise."""
    if isinstance(value, list | tuple) and len(value) > MAX_VALUE_SIZE:
        raise TemplateLimitError(f"a list of {len(value)} items is over {MAX_VALUE_SIZE} items")
    if isinstance(value, str) and len(value) * 4 > MAX_VALUE_SIZE:
        size = len(value.encode("utf-8", "replace"))
        if size > MAX_VALUE_SIZE:
            raise TemplateLimitError(f"a text of {size} bytes is over {MAX_VALUE_SIZE} bytes")
    return value


def refuse_over(size: int, what: str) -> None:
    """Raise :class:`TemplateLimitError` when ``size`` is over :data:`MAX_VALUE_SIZE`."""
    if size > MAX_VALUE_SIZE:
        raise TemplateLimitError(f"{what} would build a value over {MAX_VALUE_SIZE} characters")


def _refuse_int_over(bits: int, what: str) -> None:
    if bits * _DIGITS_PER_BIT > MAX_INT_DIGITS:
        raise TemplateLimitError(f"{what} would build a number over {MAX_INT_DIGITS} digits")


def measure(value: Any) -> int:
    """Rough rendered size of a value: characters of strings, items of containers."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list | tuple):
        total = len(value)
        for item in value:
            total += measure(item)
            if total > MAX_VALUE_SIZE:
                break
        return total
    if isinstance(value, Mapping):
        return len(value) + sum(measure(k) + measure(v) for k, v in value.items())
    return 1


def check_binop(operator: str, left: Any, right: Any) -> None:
    """Refuse ``*``, ``+``, ``**`` and ``%`` that would build an oversized value."""
    if operator == "*":
        for seq, count in ((left, right), (right, left)):
            if isinstance(seq, str | list | tuple) and isinstance(count, int):
                refuse_over(measure(seq) * max(count, 0), "this multiplication")
        if isinstance(left, int) and isinstance(right, int):
            _refuse_int_over(left.bit_length() + right.bit_length(), "this multiplication")
    elif operator == "+":
        if isinstance(left, str | list | tuple) and isinstance(right, str | list | tuple):
            refuse_over(measure(left) + measure(right), "this addition")
    elif operator == "**":
        if isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
            _refuse_int_over(left.bit_length() * right, "this power")
    elif operator == "%" and isinstance(left, str):
        raise TemplateLimitError("'%' string formatting is not available; use '~' and filters")
