"""Checks that a Slack interaction really comes from Slack (SPEC.md §21).

slack_sdk's SignatureVerifier does the v0 HMAC-SHA256 of ``v0:{ts}:{raw body}``, the 5-minute
window and the constant-time comparison; this wrapper only adapts headers and our clock to it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from slack_sdk.signature import Clock, SignatureVerifier


class _OurClock(Clock):
    """slack_sdk's clock reading ours, so tests can move time without sleeping."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now

    def now(self) -> float:
        return self._now()


def slack_request_is_valid(
    secret: str, headers: Mapping[str, str], body: bytes, now: Callable[[], float]
) -> bool:
    """Whether ``body`` carries a valid, fresh Slack signature for ``secret``."""
    verifier = SignatureVerifier(secret, clock=_OurClock(now))
    return verifier.is_valid(
        body,
        headers.get("X-Slack-Request-Timestamp"),
        headers.get("X-Slack-Signature"),
    )
