"""Dotted paths into JSON observations (``items.0.status``, ``items[0].status``).

Conditions, templates and the action policy all point into JSON values with the same path
language, so it lives here once. Parsing happens when a watcher is loaded (a bad path is a load
error with a precise message); resolving happens on every observation and therefore never raises:
an absent value is the :data:`MISSING` sentinel, distinct from JSON ``null``. Resolution only
indexes dicts and lists — a segment is never looked up as an attribute or method of the host
language, so ``payload.items`` is the key ``items``.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any, Final

__all__ = ["MISSING", "Missing", "is_index", "parse_path", "resolve"]

# A list longer than this many decimal digits cannot exist, so longer indices are simply absent
# (and are never converted with int(), whose cost and digit limit we do not want to meet).
_MAX_INDEX_DIGITS: Final = 18


class Missing(enum.Enum):
    """Type of :data:`MISSING`; an enum so the sentinel survives copy and pickle as itself."""

    MISSING = "MISSING"

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Final = Missing.MISSING
"""The value of a path that does not resolve (absent key, index out of range, wrong type)."""


def is_index(segment: str) -> bool:
    """Whether ``segment`` indexes an array: non-negative decimal, no sign, no leading zero."""
    return _is_plain_integer(segment) and len(segment) <= _MAX_INDEX_DIGITS


def _is_plain_integer(text: str) -> bool:
    """ASCII decimal digits, no sign, no leading zero (``"0"`` itself is fine)."""
    return text.isascii() and text.isdigit() and (text == "0" or not text.startswith("0"))


def parse_path(text: str) -> tuple[str, ...]:
    """Split a path into its segments; ``items[0].status`` gives ``("items", "0", "status")``.

    Raises ``ValueError`` naming the path, the position and the fix for an empty path, an empty
    segment (``a..b``, a leading or trailing dot), an unbalanced bracket or a bracket that does
    not hold a non-negative integer.
    """
    if not text:
        raise ValueError("path is empty (write a dotted path such as 'items.0.status')")
    segments: list[str] = []
    position = 0
    expect_segment = True  # at the start or right after a '.'
    while position < len(text):
        char = text[position]
        if char == "[":
            if expect_segment and segments:
                raise ValueError(_empty_segment(text, position))
            position = _parse_bracket(text, position, segments)
            expect_segment = False
            if position < len(text) and text[position] not in ".[":
                raise ValueError(f"path {text!r}: expected '.' or '[' after ']' at character {position}")
        elif char == "]":
            raise ValueError(f"path {text!r}: ']' at character {position} has no matching '['")
        elif char == ".":
            if expect_segment:
                raise ValueError(_empty_segment(text, position))
            expect_segment = True
            position += 1
        else:  # a plain segment: only reachable at the start or right after '.'
            end = _segment_end(text, position)
            segments.append(text[position:end])
            expect_segment = False
            position = end
    if expect_segment:
        raise ValueError(_empty_segment(text, len(text)))
    return tuple(segments)


def _segment_end(text: str, start: int) -> int:
    """Index just past the plain segment starting at ``start``."""
    end = start
    while end < len(text) and text[end] not in ".[]":
        end += 1
    return end


def _parse_bracket(text: str, start: int, segments: list[str]) -> int:
    """Append the index inside the bracket opened at ``start``; return the index after ``]``."""
    close = text.find("]", start + 1)
    if close == -1:
        raise ValueError(f"path {text!r}: '[' at character {start} is never closed with ']'")
    inner = text[start + 1 : close]
    if "[" in inner:
        raise ValueError(f"path {text!r}: '[' at character {start} is never closed with ']'")
    if not _is_plain_integer(inner):
        raise ValueError(
            f"path {text!r}: [{inner}] at character {start} is not an array index "
            "(write a non-negative integer without sign or leading zeros, such as [0])"
        )
    segments.append(inner)
    return close + 1


def _empty_segment(text: str, position: int) -> str:
    """The error message for an empty segment found at ``position``."""
    return (
        f"path {text!r} has an empty segment at character {position} "
        "(remove the extra '.'; segments are separated by a single '.')"
    )


def resolve(data: Any, segments: Sequence[str]) -> Any:
    """The value at ``segments`` inside ``data``, or :data:`MISSING`; never raises.

    A dict is indexed by key (so the key ``"0"`` is found by the segment ``"0"``); a list or
    tuple only by a segment for which :func:`is_index` holds and that is in range.
    """
    current = data
    for segment in segments:
        if isinstance(current, dict):
            current = current.get(segment, MISSING)
        elif isinstance(current, list | tuple) and is_index(segment):
            index = int(segment)
            current = current[index] if index < len(current) else MISSING
        else:
            return MISSING
        if current is MISSING:
            return MISSING
    return current
