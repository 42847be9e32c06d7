"""How a body (HTTP answer, SSE event, WebSocket message) becomes an observed value.

SPEC.md §3: a body that parses as JSON is JSON; a body labelled JSON (``application/json``
or any ``+json`` type) must parse; anything else is observed as ``{"text": …, "contentType":
…}`` so text and HTML pages can be watched with ``contains``/``matches``. Integers keep
every digit (Python's ``json``); ``NaN``/``Infinity`` are not JSON and are refused. Pure.
"""

from __future__ import annotations

import json
from typing import Any

from sentinel_hooks.net.body import decode_body, known_encoding
from sentinel_hooks.watchers.strategy import ObserveError


class NotJson(ValueError):
    """The text is not a JSON document."""


def _refuse_constant(name: str) -> Any:
    raise NotJson(f"{name} is not a JSON value")


def parse_json(text: str | bytes) -> Any:
    """The JSON value of ``text`` (bytes: UTF-8/16/32 detected, BOM allowed), or ``NotJson``."""
    try:
        if isinstance(text, bytes):
            text = text.decode(json.detect_encoding(text))
        return json.loads(text.removeprefix("\ufeff"), parse_constant=_refuse_constant)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError and digit limits are ValueErrors
        raise NotJson(str(exc)) from exc


def is_json_media_type(media_type: str) -> bool:
    """Whether ``media_type`` (bare, lowercased) labels JSON: ``application/json`` or ``*/*+json``."""
    return media_type == "application/json" or media_type.endswith("+json")


def json_or_text(text: str) -> Any:
    """The JSON value of ``text``, or ``text`` itself when it is not JSON (SSE ``data``)."""
    try:
        return parse_json(text)
    except NotJson:
        return text


def body_observation(body: bytes, media_type: str, charset: str | None) -> Any:
    """The value observed for an HTTP body with the given bare media type and charset.

    Raises ``ObserveError`` (not transient) when a body labelled JSON does not parse.
    """
    encoding = known_encoding(charset)
    try:
        return parse_json(body.decode(encoding) if encoding else body)
    except (NotJson, UnicodeDecodeError) as exc:
        if is_json_media_type(media_type):
            raise ObserveError(f"body labelled JSON ({media_type}) does not parse: {exc}") from exc
    return {"text": decode_body(body, charset), "contentType": media_type or None}
