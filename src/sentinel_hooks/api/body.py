"""Reading JSON request bodies safely (SPEC.md §9 request hygiene).

Non-empty bodies must be labelled JSON (415); duplicate keys, nesting deeper than 100, numbers
longer than 4,300 digits, ``NaN`` and ``±Infinity`` (which Python's json module reads but JSON
does not have) and strings that are not Unicode (lone surrogates, written as ``\\ud800``) are
refused with 400, oversized bodies with 413. What a handler gets is therefore what can be
stored and evaluated as sent: NaN would be stored as null, a lone surrogate cannot be encoded.
"""

from __future__ import annotations

import json
import re
from typing import Any

from aiohttp import web

from sentinel_hooks.api.errors import ApiError

MAX_DEPTH = 100
MAX_NUMBER_DIGITS = 4300
SURROGATE = re.compile(r"[\ud800-\udfff]")


def is_json_type(content_type: str) -> bool:
    """``application/json`` or any ``+json`` media type."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def require_json_type(request: web.Request) -> None:
    """415 unless a body that is there is labelled JSON (an empty body needs no label)."""
    if request.body_exists and not is_json_type(request.headers.get("Content-Type", "")):
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


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (numbers must be finite)")


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` is not Unicode: a lone surrogate from a JSON escape, or header bytes
    that were not UTF-8 (aiohttp hands those over as surrogate escapes)."""
    return SURROGATE.search(text) is not None


def _lone_surrogate(text: str) -> ApiError | None:
    found = SURROGATE.search(text)
    if found is None:
        return None
    escaped = f"\\u{ord(found.group()):04x}"
    message = f"invalid JSON: a string holds a lone surrogate ({escaped}), which is not Unicode"
    return ApiError(400, "invalid_json", message)


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
                raise ApiError(400, "invalid_json", f"JSON nested deeper than {MAX_DEPTH} levels")
            children = [*node, *node.values()] if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)


def parse_json(raw: bytes) -> Any:
    """Parse ``raw`` with the hygiene rules; ApiError(400) explains what is wrong."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, "invalid_json", f"the body is not UTF-8: {exc.reason}") from exc
    if text.count("[") + text.count("{") > MAX_DEPTH and _too_deep_fast(text):
        raise ApiError(400, "invalid_json", f"JSON nested deeper than {MAX_DEPTH} levels")
    if not text.strip():
        raise ApiError(400, "invalid_json", "the body is empty; send a JSON value")
    try:
        value = json.loads(text, object_pairs_hook=_pairs, parse_float=_float, parse_constant=_constant)
    except RecursionError as exc:
        raise ApiError(400, "invalid_json", f"JSON nested deeper than {MAX_DEPTH} levels") from exc
    except ValueError as exc:
        raise ApiError(400, "invalid_json", f"invalid JSON: {exc}") from exc
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


async def read_json(request: web.Request, *, max_bytes: int) -> Any:
    """The request's JSON body (label, size and shape checked)."""
    require_json_type(request)
    return parse_json(await read_raw(request, max_bytes=max_bytes))


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
