"""The ``webhook`` target: POST the message as JSON to a URL the user owns (SPEC.md §6.2).

The body is ``{callbackId, watcherId, eventName, priority, message, envelope?}``. When the
target has a ``secret``, ``X-Sentinel-Signature: sha256=<hex>`` is the HMAC-SHA256 of the
exact bytes sent, so receivers verify what they received. ``Idempotency-Key`` is the same on
every attempt of one delivery. The request goes through ``SafeHttp`` (allowlist, private
addresses, no redirects); the status decides whether the dispatcher may retry.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from multidict import CIMultiDict
from yarl import URL

from sentinel_hooks import __version__
from sentinel_hooks.config.targets import TargetSpec, WebhookTargetSpec
from sentinel_hooks.delivery.targets.base import (
    DeliveryError,
    Message,
    Target,
    TargetContext,
    TransientDeliveryError,
    delivery_error,
)
from sentinel_hooks.net.errors import HttpStatusError, NetError
from sentinel_hooks.net.response import raise_for_status

SIGNATURE_HEADER = "X-Sentinel-Signature"
RETRYABLE_4XX = frozenset({408, 429})
RETRY_AFTER_STATUSES = frozenset({429, 503})


def webhook_body(message: Message) -> dict[str, Any]:
    """The JSON object of SPEC.md §6.2 for ``message`` (``envelope`` only when it carries one)."""
    body: dict[str, Any] = {
        "callbackId": message.callback_id,
        "watcherId": message.watcher_id,
        "eventName": message.event_name,
        "priority": message.priority,
        "message": message.text,
    }
    if message.envelope is not None:
        body["envelope"] = message.envelope
    return body


def signature(secret: str, body: bytes) -> str:
    """The ``X-Sentinel-Signature`` value: ``sha256=`` and the hex HMAC-SHA256 of ``body``."""
    return signature_of(secret.encode("utf-8"), body)


def signature_of(key: bytes, body: bytes) -> str:
    """``signature`` with the secret already encoded (once per target, not per request)."""
    return "sha256=" + hmac.digest(key, body, hashlib.sha256).hex()


def status_retryable(status: int) -> bool:
    """Whether a non-2xx answer may succeed later: 5xx, 408 and 429 (any other 4xx will not)."""
    return status >= 500 or status in RETRYABLE_4XX


def status_failure(message: str, status: int, retry_after_s: float | None) -> DeliveryError:
    """A receiver's non-2xx answer as a ``DeliveryError``: transient for 5xx, 408 and 429, keeping
    a Retry-After hint on 429 and 503 only."""
    if not status_retryable(status):
        return DeliveryError(message)
    hint = retry_after_s if status in RETRY_AFTER_STATUSES else None
    return TransientDeliveryError(message, retry_after_s=hint)


def shown_url(url: str) -> str:
    """``url`` cut to scheme, host and port, so paths and queries holding tokens stay out of logs."""
    try:
        return str(URL(url).origin())
    except (TypeError, ValueError):
        return "an invalid URL"


class WebhookTarget:
    """POSTs signed JSON through the service's ``SafeHttp``; one attempt per ``send``."""

    def __init__(self, name: str, spec: WebhookTargetSpec, context: TargetContext) -> None:
        self.name = name
        self._spec = spec
        self._context = context
        self._where = f"webhook target {name!r} ({shown_url(spec.url)})"
        self._fixed_headers = CIMultiDict(spec.headers)  # the same on every request: built once
        self._fixed_headers["Content-Type"] = "application/json"
        self._fixed_headers["User-Agent"] = f"sentinel-hooks/{__version__}"
        self._secret = None if spec.secret is None else spec.secret.get_secret_value().encode("utf-8")

    def _body(self, message: Message) -> bytes:
        try:
            text = json.dumps(webhook_body(message), ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise DeliveryError(f"{self._where}: the message is not JSON ({exc})") from exc
        return text.encode("utf-8")

    def _headers(self, body: bytes, idempotency_key: str) -> CIMultiDict[str]:
        headers = self._fixed_headers.copy()
        headers["Idempotency-Key"] = idempotency_key
        if self._secret is not None:
            headers[SIGNATURE_HEADER] = signature_of(self._secret, body)
        return headers

    async def send(self, message: Message, *, idempotency_key: str) -> None:
        """POST ``message`` once; return when the receiver answered 2xx, else raise ``DeliveryError``."""
        body = self._body(message)
        try:
            response = await self._context.http.request(
                "POST", self._spec.url, headers=self._headers(body, idempotency_key), data=body
            )
        except NetError as exc:
            raise delivery_error(f"{self._where}: {exc.reason}", like=exc) from exc
        try:
            raise_for_status(response)
        except HttpStatusError as exc:
            raise status_failure(
                f"{self._where}: answered {exc.reason}", exc.status, exc.retry_after_s
            ) from exc

    async def close(self) -> None:
        """Nothing to release: the ``SafeHttp`` client belongs to the service."""


def create(name: str, spec: TargetSpec, context: TargetContext) -> Target:
    """The ``webhook`` target called ``name``."""
    if not isinstance(spec, WebhookTargetSpec):
        raise TypeError(f"target {name!r}: expected a webhook spec, got {type(spec).__name__}")
    return WebhookTarget(name, spec, context)
