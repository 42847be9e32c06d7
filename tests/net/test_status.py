"""raise_for_status and Retry-After: which answers are errors and when to try again."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from multidict import CIMultiDict, CIMultiDictProxy

from sentinel_hooks.net.errors import HttpStatusError
from sentinel_hooks.net.response import HttpResponse, parse_retry_after, raise_for_status

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def answer(status: int, body: bytes = b"", content_type: str = "text/plain", **headers: str) -> HttpResponse:
    return HttpResponse(
        method="GET",
        url="https://api.example.com/v1",
        status=status,
        headers=CIMultiDictProxy(CIMultiDict({k.replace("_", "-"): v for k, v in headers.items()})),
        content_type=content_type,
        charset=None,
        body=body,
        received_at=NOW,
    )


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        (" 0 ", 0.0),
        ("Thu, 01 Jan 2026 12:00:30 GMT", 30.0),
        ("Thu, 01 Jan 2026 11:00:00 GMT", 0.0),
        ("soon", None),
        ("-5", None),
        ("1.5", None),
        (None, None),
    ],
)
def test_retry_after_values(value: str | None, seconds: float | None) -> None:
    """Delay-seconds and HTTP-dates become seconds from now (past dates: 0); anything else is ignored."""
    assert seconds == parse_retry_after(value, now=NOW)


def test_2xx_is_not_an_error() -> None:
    """A 204 passes raise_for_status."""
    raise_for_status(answer(204))


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (500, True),
        (503, True),
        (408, True),
        (429, True),
        (400, False),
        (401, False),
        (404, False),
        (304, False),
    ],
)
def test_retryable_by_status(status: int, retryable: bool) -> None:
    """5xx, 408 and 429 may pass with time; other statuses will not."""
    with pytest.raises(HttpStatusError) as caught:
        raise_for_status(answer(status))
    assert (status, retryable) == (caught.value.status, caught.value.retryable)


def test_status_error_names_request_and_body_excerpt() -> None:
    """The message names the request, the status and the start of the body (one line)."""
    with pytest.raises(HttpStatusError) as caught:
        raise_for_status(answer(500, b"database\n   unavailable"))
    assert "GET https://api.example.com/v1: HTTP 500 Internal Server Error: database unavailable" == str(
        caught.value
    )


def test_retry_after_seconds_are_kept() -> None:
    """A 429 with Retry-After: 7 carries retry_after_s=7."""
    with pytest.raises(HttpStatusError) as caught:
        raise_for_status(answer(429, Retry_After="7"))
    assert 7.0 == caught.value.retry_after_s


def test_retry_after_date_is_read_against_server_date() -> None:
    """An HTTP-date Retry-After is measured from the server's Date header (no clock skew)."""
    with pytest.raises(HttpStatusError) as caught:
        raise_for_status(
            answer(503, Date="Mon, 05 Jan 2026 08:00:00 GMT", Retry_After="Mon, 05 Jan 2026 08:01:00 GMT")
        )
    assert 60.0 == caught.value.retry_after_s


def reason(status: int, body: bytes, content_type: str = "text/html") -> str:
    with pytest.raises(HttpStatusError) as caught:
        raise_for_status(answer(status, body, content_type))
    return caught.value.reason


@pytest.mark.parametrize(
    ("body", "content_type", "tail"),
    [
        (b"<html><title>502 Bad Gateway</title></html>", "text/html", ' (HTML page: "502 Bad Gateway")'),
        (b"<title>Fish &amp; Chips</title>", "application/xhtml+xml", ' (HTML page: "Fish & Chips")'),
        (b"  <!DOCTYPE html><title>down</title>", "", ' (HTML page: "down")'),
        (b"<html><body><h1>oops</h1></body></html>", "text/html", " (HTML page)"),
        (b"<html><title>never closed", "text/html", ' (HTML page: "never closed")'),
        (b"<![if !IE]><title>odd</title>", "text/html", ' (HTML page: "odd")'),
        (b"<title>a\x1b[31mb\x00</title>", "text/html", ' (HTML page: "a [31mb")'),
        (b'{"error": "<b>upstream</b>"}', "application/json", ': {"error": "<b>upstream</b>"}'),
    ],
)
def test_html_error_page_is_named_by_its_title(body: bytes, content_type: str, tail: str) -> None:
    """An HTML body (labelled, or unlabelled and starting like a page) is summed up by its title."""
    assert "HTTP 502 Bad Gateway" + tail == reason(502, body, content_type)


def test_long_title_is_cut() -> None:
    """A title longer than 100 characters is cut, so the message stays short."""
    text = reason(500, b"<title>" + b"word " * 100 + b"</title>")
    assert 100 == len(text.split('"')[1])


def test_title_past_the_scan_limit_is_not_searched() -> None:
    """Only the top of a page is parsed: a title after 64 KiB of markup is not looked for."""
    page = b"<p>x</p>" * 9000 + b"<title>t</title>"
    assert "HTTP 500 Internal Server Error (HTML page)" == reason(500, page)


def test_unknown_status_has_no_phrase() -> None:
    """A code outside the standard ones reads ``HTTP 599``."""
    assert "HTTP 599: busy" == reason(599, b"busy", "text/plain")
