"""Pure helpers for reading HTTP bodies: the bare media type and charset-aware decoding.

Kept free of aiohttp so the observation code (``watchers.strategies.http_body``) and the
client share one definition of "what text is this body".
"""

from __future__ import annotations

import codecs


def media_type(content_type: str | None) -> str:
    """The bare, lowercased media type of a Content-Type value (``text/html; charset=x`` → ``text/html``)."""
    if not content_type:
        return ""
    return content_type.split(";", 1)[0].strip().lower()


def known_encoding(charset: str | None) -> str | None:
    """Python's name for ``charset``, or None when it is absent or unknown."""
    if not charset:
        return None
    try:
        return codecs.lookup(charset.strip().strip('"')).name
    except LookupError:
        return None


def decode_body(body: bytes, charset: str | None) -> str:
    """``body`` as text: ``charset`` when Python knows it, else UTF-8; undecodable bytes replaced."""
    return body.decode(known_encoding(charset) or "utf-8", errors="replace")
