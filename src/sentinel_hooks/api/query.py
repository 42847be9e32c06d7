"""Integer query parameters (``limit``, ``afterSeq``): plain ASCII digits within a range, else 400.

``str.isdigit`` is true for ``'²'`` and other non-ASCII digits, and a number past 2^63-1
overflows SQLite, so each parameter is matched against ``[0-9]+`` and its range before it
reaches a store.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from sentinel_hooks.api.errors import ApiError

DIGITS = re.compile(r"[0-9]{1,19}")


def int_param(
    query: Mapping[str, str], name: str, *, default: int, minimum: int, maximum: int, code: str
) -> int:
    """The query parameter ``name`` (of a request's query, or an MCP tool call's) as an int in
    ``[minimum, maximum]``; ``default`` when absent or empty; ApiError(400, ``code``) naming the
    range otherwise."""
    raw = query.get(name, "")
    if raw == "":
        return default
    if DIGITS.fullmatch(raw) is None or not minimum <= int(raw) <= maximum:
        raise ApiError(400, code, f"{name} must be an integer from {minimum} to {maximum}, got {raw!r}")
    return int(raw)


def limit_param(query: Mapping[str, str], *, maximum: int, default: int) -> int:
    """The ``limit`` of a listing: 1 to ``maximum``."""
    return int_param(query, "limit", default=default, minimum=1, maximum=maximum, code="invalid_limit")
