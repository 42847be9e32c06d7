"""A fully read HTTP answer, and the rules applied to every answer before it is read.

``read_limited`` stops reading (and closes the connection) past the byte limit;
``refuse_redirect`` turns any 3xx into ``RedirectRefused``; ``raise_for_status`` is what a
caller uses when a non-2xx answer is an error to it (``Retry-After`` parsed into seconds; the
body summed up in one short line: an HTML error page by its title, anything else by its first
words).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from aiohttp import ClientResponse
from multidict import CIMultiDictProxy

from sentinel_hooks.net.body import decode_body, html_title, looks_like_html, one_line
from sentinel_hooks.net.errors import RedirectRefused, ResponseTooLarge, status_error

CHUNK_BYTES = 64 * 1024
EXCERPT_CHARS = 200
HTML_SCAN_BYTES = 64 * 1024


@dataclass(frozen=True)
class HttpResponse:
    """A complete answer: ``content_type`` is the bare, lowercased media type ("" when absent)."""

    method: str
    url: str
    status: int
    headers: CIMultiDictProxy[str]
    content_type: str
    charset: str | None
    body: bytes
    received_at: datetime

    @property
    def ok(self) -> bool:
        """Whether the status is 2xx."""
        return 200 <= self.status < 300

    def text(self) -> str:
        """The body decoded with its charset (UTF-8 when absent or unknown), bad bytes replaced."""
        return decode_body(self.body, self.charset)


def parse_retry_after(value: str | None, *, now: datetime) -> float | None:
    """Seconds to wait from a Retry-After value (delay-seconds or HTTP-date), or None if absent/invalid."""
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return float(int(text))
    try:
        at = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return max(0.0, (at - now).total_seconds())


def raise_for_status(response: HttpResponse) -> None:
    """Raise ``HttpStatusError`` (transient for 5xx/408/425/429, with Retry-After) unless 2xx."""
    if response.ok:
        return
    reference = response.received_at
    date_header = response.headers.get("Date")
    if date_header:
        try:
            server_now = parsedate_to_datetime(date_header)
        except (TypeError, ValueError, IndexError):
            server_now = None
        if server_now is not None and server_now.tzinfo is not None:
            reference = server_now  # Retry-After dates are in the server's clock
    retry_after = parse_retry_after(response.headers.get("Retry-After"), now=reference)
    head = decode_body(response.body[: EXCERPT_CHARS * 4], response.charset)
    if looks_like_html(head, response.content_type):  # a proxy's error page: its title says it all
        title = html_title(decode_body(response.body[:HTML_SCAN_BYTES], response.charset))
        error = status_error(response.status, retry_after_s=retry_after, page_title=title)
    else:
        excerpt = one_line(head, EXCERPT_CHARS)
        error = status_error(response.status, retry_after_s=retry_after, detail=excerpt)
    raise error.for_request(response.method, response.url)


def refuse_redirect(response: ClientResponse) -> None:
    """Close ``response`` and raise ``RedirectRefused`` when it is a 3xx (304 Not Modified excepted)."""
    if 300 <= response.status < 400 and response.status != 304:
        location = response.headers.get("Location")
        response.close()
        raise RedirectRefused(response.status, location)


async def read_limited(response: ClientResponse, limit_bytes: int) -> bytes:
    """The whole body, or ``ResponseTooLarge`` (connection closed) once it passes ``limit_bytes``."""
    declared = response.content_length
    if declared is not None and declared > limit_bytes:
        response.close()
        raise ResponseTooLarge(limit_bytes, declared_bytes=declared)
    if declared is not None and "Content-Encoding" not in response.headers:
        return await response.read()  # exactly the declared bytes, within the limit: one read
    chunks: list[bytes] = []
    total = 0
    async for chunk in response.content.iter_chunked(CHUNK_BYTES):
        total += len(chunk)
        if total > limit_bytes:
            response.close()
            raise ResponseTooLarge(limit_bytes)
        chunks.append(chunk)
    return b"".join(chunks)
