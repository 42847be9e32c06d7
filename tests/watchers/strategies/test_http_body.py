"""How bodies become observations: JSON, labelled JSON, text pages (pure)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from sentinel_hooks.watchers.strategies.http_body import body_observation, json_or_text
from sentinel_hooks.watchers.strategy import ObserveError


@pytest.mark.parametrize(
    ("body", "media_type", "charset", "expected"),
    [
        (b'{"a": [1, 2]}', "application/json", None, {"a": [1, 2]}),
        (
            b'{"n": 123456789012345678901234567890}',
            "application/json",
            None,
            {"n": 123456789012345678901234567890},
        ),
        (b'{"ok": true}', "application/problem+json", None, {"ok": True}),
        (b'{"ok": true}', "text/plain", None, {"ok": True}),
        (b"[1]", "", None, [1]),
        (b'\xef\xbb\xbf{"bom": 1}', "application/json", None, {"bom": 1}),
        ('{"s": "é"}'.encode("utf-16"), "application/json", None, {"s": "é"}),
        ('{"s": "é"}'.encode("latin-1"), "application/json", "iso-8859-1", {"s": "é"}),
        (
            b"<h1>Status: OK</h1>",
            "text/html",
            "utf-8",
            {"text": "<h1>Status: OK</h1>", "contentType": "text/html"},
        ),
        (b"caf\xe9", "text/plain", "latin-1", {"text": "café", "contentType": "text/plain"}),
        (b"bad \xff byte", "text/plain", None, {"text": "bad \ufffd byte", "contentType": "text/plain"}),
        (b"NaN", "text/plain", None, {"text": "NaN", "contentType": "text/plain"}),
        (b"", "", None, {"text": "", "contentType": None}),
    ],
)
def test_body_observation(body: bytes, media_type: str, charset: str | None, expected: Any) -> None:
    """JSON when it parses (exact big ints, BOM, UTF-16, declared charset), else text with its type."""
    assert expected == body_observation(body, media_type, charset)


@pytest.mark.parametrize("media_type", ["application/json", "application/vnd.api+json"])
def test_labelled_json_must_parse(media_type: str) -> None:
    """A body labelled JSON that does not parse is a non-retryable error naming the label."""
    expected = re.escape(f"body labelled JSON ({media_type}) does not parse")
    with pytest.raises(ObserveError, match=expected) as caught:
        body_observation(b"<html>oops</html>", media_type, None)
    assert caught.value.retryable is False


def test_labelled_json_refuses_nan() -> None:
    """NaN is not JSON, even though Python's parser would accept it."""
    with pytest.raises(ObserveError, match="NaN is not a JSON value"):
        body_observation(b'{"x": NaN}', "application/json", None)


@pytest.mark.parametrize(("text", "expected"), [('{"a": 1}', {"a": 1}), ("42", 42), ("hello", "hello")])
def test_json_or_text(text: str, expected: Any) -> None:
    """SSE data: its JSON value when it parses, else the string itself."""
    assert expected == json_or_text(text)
