"""Pure helpers for reading HTTP bodies: the bare media type, charset-aware decoding, and the
title of an HTML error page.

Kept free of aiohttp so the observation code (``watchers.strategies.http_body``) and the
client share one definition of "what text is this body".
"""

from __future__ import annotations

import codecs
from html.parser import HTMLParser


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


HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TITLE_CHARS = 100
_SCAN_CHARS = 64 * 1024  # an error page's <title> is near its top: read no further for it
_FEED_CHARS = 4096


def looks_like_html(text: str, content_type: str) -> bool:
    """Whether a body is an HTML page: labelled so, or unlabelled and starting like one."""
    if content_type in HTML_TYPES:
        return True
    if content_type not in ("", "text/plain", "application/octet-stream"):
        return False
    start = text[:256].lstrip().lower()
    return start.startswith(("<!doctype html", "<html"))


class _TitleParser(HTMLParser):
    """Collects the text of the first ``<title>`` element (character references decoded)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.inside = False
        self.done = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title" and not self.done:
            self.inside = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self.inside:
            self.inside, self.done = False, True

    def handle_data(self, data: str) -> None:
        if self.inside:
            self.parts.append(data)


def one_line(text: str, limit: int) -> str:
    """``text`` with every run of whitespace or control characters made one space, cut at
    ``limit`` characters (it is shown in terminals and logs)."""
    flat = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def html_title(text: str) -> str:
    """The page's ``<title>`` on one line, at most 100 characters ("" when it has none).

    Parsed with the standard library's lenient HTML parser, from the first 64 KiB only.
    """
    parser = _TitleParser()
    try:
        for start in range(0, min(len(text), _SCAN_CHARS), _FEED_CHARS):
            parser.feed(text[start : start + _FEED_CHARS])
            if parser.done:
                break
    except (AssertionError, ValueError):  # markup the parser gives up on: keep what was read
        pass
    return one_line("".join(parser.parts), TITLE_CHARS)
