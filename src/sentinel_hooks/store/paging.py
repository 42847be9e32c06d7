"""Opaque listing cursors shared by every Store, so a cursor means the same thing everywhere.

A listing is ordered newest first by ``(created_ms, id)``; a cursor names the last item of a
page and the next page starts strictly after it (keyset paging: no gaps or repeats while items
are added). The cursor is the pair in URL-safe base64, opaque to clients.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from typing import TypeVar

from sentinel_hooks.store.base import InvalidCursor
from sentinel_hooks.store.records import Page

R = TypeVar("R")

_MS_WIDTH = 15


def encode_cursor(created_ms: int, item_id: str) -> str:
    """The cursor pointing just past the item created at ``created_ms`` with id ``item_id``."""
    raw = f"{created_ms}:{item_id}".encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    """The ``(created_ms, item_id)`` inside ``cursor``; raises ``InvalidCursor`` when malformed."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        raw = base64.urlsafe_b64decode(padded.encode("ascii")).decode()
        ms_text, sep, item_id = raw.partition(":")
        # ASCII digits that fit the member width (so also SQLite's int64): a forged cursor's time
        # must be refused here, not overflow a query
        if not sep or not (ms_text.isascii() and ms_text.isdigit() and len(ms_text) <= _MS_WIDTH):
            raise ValueError(raw)
        return int(ms_text), item_id
    except (ValueError, binascii.Error, UnicodeError) as exc:
        raise InvalidCursor(
            f"cursor {cursor!r} is not one this store issued; "
            "pass the nextCursor of a previous page, or omit it for the first page"
        ) from exc


def check_positive(value: int, name: str = "limit") -> int:
    """``value`` itself when it is at least 1 (a page of nothing, a lease or window of no time
    are a caller's bug); ValueError naming the argument otherwise."""
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return value


def sort_member(created_ms: int, item_id: str) -> str:
    """A string whose lexical order is the ``(created_ms, item_id)`` order (Redis lex indexes)."""
    return f"{created_ms:0{_MS_WIDTH}d}:{item_id}"


def split_member(member: str) -> tuple[int, str]:
    """Inverse of ``sort_member``."""
    ms_text, _, item_id = member.partition(":")
    return int(ms_text), item_id


def to_page(rows: Sequence[tuple[int, str, str]], limit: int, load: Callable[[str], R]) -> Page[R]:
    """A page from ``(created_ms, id, doc)`` rows, newest first, fetched with ``limit + 1``.

    The extra row only tells that another page exists; the cursor names the page's last item.
    """
    shown = rows[:limit]
    next_cursor = encode_cursor(shown[-1][0], shown[-1][1]) if len(rows) > limit else None
    return Page(items=[load(doc) for _, _, doc in shown], next_cursor=next_cursor)
