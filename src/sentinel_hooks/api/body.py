"""Reading JSON request bodies safely (SPEC.md §9 request hygiene).

Non-empty bodies must be labelled JSON (415) and oversized ones are refused with 413; what is
read is parsed strictly (``core.strict_json``: duplicate keys, deep nesting, long numbers, NaN,
lone surrogates), anything else it refuses is a 400 ``invalid_json`` saying why.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from sentinel_hooks.api.errors import ApiError
from sentinel_hooks.core.strict_json import InvalidJson, has_lone_surrogate, loads_strict

__all__ = ["has_lone_surrogate", "is_json_type", "parse_json", "read_json", "read_raw", "require_json_type"]


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


def parse_json(raw: bytes) -> Any:
    """Parse ``raw`` with the hygiene rules; ApiError(400) explains what is wrong."""
    try:
        return loads_strict(raw)
    except InvalidJson as exc:
        raise ApiError(400, "invalid_json", str(exc)) from exc


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
