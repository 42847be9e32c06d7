"""Reading JSON request bodies safely (SPEC.md §9 request hygiene).

Bodies must be labelled JSON; duplicate keys, nesting deeper than 100 and numbers longer
than 4,300 digits are refused with 400, oversized bodies with 413.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from sentinel_hooks.api.errors import ApiError

MAX_DEPTH = 100
MAX_NUMBER_DIGITS = 4300


def is_json_type(content_type: str) -> bool:
    """``application/json`` or any ``+json`` media type."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def require_json_type(request: web.Request) -> None:
    if not is_json_type(request.headers.get("Content-Type", "")):
        raise ApiError(
            415, "unsupported_media_type", "the body must be JSON (Content-Type: application/json)"
        )


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


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            if depth > MAX_DEPTH:
                return depth
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return deepest


def parse_json(raw: bytes) -> Any:
    """Parse ``raw`` with the hygiene rules; ApiError(400) explains what is wrong."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, "invalid_json", f"the body is not UTF-8: {exc.reason}") from exc
    if text.count("[") + text.count("{") > MAX_DEPTH and _too_deep_fast(text):
        raise ApiError(400, "invalid_json", f"JSON nested deeper than {MAX_DEPTH} levels")
    try:
        value = json.loads(text, object_pairs_hook=_pairs, parse_float=_float)
    except RecursionError as exc:
        raise ApiError(400, "invalid_json", f"JSON nested deeper than {MAX_DEPTH} levels") from exc
    except ValueError as exc:
        raise ApiError(400, "invalid_json", f"invalid JSON: {exc}") from exc
    if _depth(value) > MAX_DEPTH:
        raise ApiError(400, "invalid_json", f"JSON nested deeper than {MAX_DEPTH} levels")
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


async def read_json(request: web.Request, *, max_bytes: int) -> Any:
    """The request's JSON body (label, size and shape checked)."""
    require_json_type(request)
    raw = await read_raw(request, max_bytes=max_bytes)
    if not raw:
        raise ApiError(400, "invalid_json", "the body is empty; send a JSON object")
    return parse_json(raw)


async def read_raw(request: web.Request, *, max_bytes: int) -> bytes:
    """The raw body (for HMAC checks), capped at ``max_bytes`` (413 past it)."""
    too_large = ApiError(413, "payload_too_large", f"the body is larger than {max_bytes} bytes")
    if request.content_length is not None and request.content_length > max_bytes:
        raise too_large
    raw = bytearray()
    async for chunk in request.content.iter_chunked(65536):
        raw.extend(chunk)
        if len(raw) > max_bytes:
            raise too_large
    return bytes(raw)
