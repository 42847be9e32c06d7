"""Slack request signing (SPEC §21): exact v0 HMAC, 5-minute window, altered bodies refused."""

from __future__ import annotations

import hashlib
import hmac

from sentinel_hooks.api.slack_signature import slack_request_is_valid

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
NOW = 1_800_000_000.0


def _signed(body: bytes, ts: int) -> dict[str, str]:
    base = f"v0:{ts}:".encode() + body
    digest = hmac.new(SECRET.encode(), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": str(ts), "X-Slack-Signature": f"v0={digest}"}


def test_signed_body_is_valid_and_alterations_are_not() -> None:
    """The signed body passes; an altered body, a wrong secret or no headers fail."""
    body = b"payload=%7B%22type%22%3A%22block_actions%22%7D"
    headers = _signed(body, int(NOW))
    assert slack_request_is_valid(SECRET, headers, body, lambda: NOW)
    assert not slack_request_is_valid(SECRET, headers, body + b"x", lambda: NOW)
    assert not slack_request_is_valid("another-secret-value", headers, body, lambda: NOW)
    assert not slack_request_is_valid(SECRET, {}, body, lambda: NOW)


def test_old_timestamp_is_refused() -> None:
    """A signature older than five minutes is refused even when the HMAC is right."""
    body = b"payload=%7B%7D"
    headers = _signed(body, int(NOW) - 301)
    assert not slack_request_is_valid(SECRET, headers, body, lambda: NOW)
    assert slack_request_is_valid(SECRET, _signed(body, int(NOW) - 200), body, lambda: NOW)
