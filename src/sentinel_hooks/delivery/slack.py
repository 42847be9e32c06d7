"""The ``slack`` target: a Block Kit message through ``slack_sdk``'s async clients (SPEC.md §6.2).

Two ways to post: an incoming webhook (``AsyncWebhookClient``) or a bot token and a channel
(``AsyncWebClient.chat_postMessage``, ``apiBase`` overridable for tests). Both run on the
service's one aiohttp session (``SafeHttp.session``), so the checking resolver and the
no-redirect trace hook apply; because ``slack_sdk`` does not call ``SafeHttp.request``, this
module also checks the URL against the host policy, bounds each send with the request timeout,
turns off the SDK's own retries (the dispatcher retries) and its proxy-from-environment, and
gives it a quiet logger (the SDK logs webhook URLs, which are secrets, at debug level).

Slack offers no idempotency key for these calls, so ``idempotency_key`` is ignored here: a
retry after a lost answer can post twice. Error messages never show the webhook URL or token.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from sentinel_hooks.config.targets import SlackTargetSpec, TargetSpec
from sentinel_hooks.delivery.target import (
    DeliveryError,
    Message,
    Target,
    TargetContext,
    TransientDeliveryError,
    delivery_error,
)
from sentinel_hooks.delivery.webhook import RETRY_AFTER_STATUSES, status_failure, status_retryable
from sentinel_hooks.net.errors import NetError
from sentinel_hooks.net.response import parse_retry_after
from sentinel_hooks.net.translate import TRANSLATED, translate

DEFAULT_API_BASE = AsyncWebClient.BASE_URL
# Slack API error codes that mean "try again later"; every other code will fail again.
RETRYABLE_ERRORS = frozenset(
    {"ratelimited", "rate_limited", "service_unavailable", "fatal_error", "internal_error", "request_timeout"}
)
SECTION_CHARS = 3000  # Slack's limit for a section block's text
CONTEXT_CHARS = 200
sdk_log = logging.getLogger("sentinel_hooks.delivery.slack.sdk")
sdk_log.setLevel(logging.WARNING)


def escape_mrkdwn(text: str) -> str:
    """``text`` with ``&``, ``<`` and ``>`` escaped, so observed data cannot make links or mentions."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def message_blocks(message: Message) -> list[dict[str, Any]]:
    """Block Kit for ``message``: a section with the text, a context line with what it is about."""
    facts = [
        ("Priority", message.priority),
        ("Event", message.event_name),
        ("Watcher", message.watcher_id),
        ("Callback", message.callback_id),
        ("Kind", message.kind),
    ]
    return [
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": _cut(escape_mrkdwn(message.text), SECTION_CHARS) or " "},
        },
        {
            "type": "context",
            "elements": [
                {"type": "mrkdwn", "text": f"*{label}:* {_cut(escape_mrkdwn(value), CONTEXT_CHARS)}"}
                for label, value in facts
            ],
        },
    ]


def fallback_text(message: Message) -> str:
    """The plain ``text`` Slack shows in notifications: the message text, escaped like the blocks."""
    return escape_mrkdwn(message.text)


class SlackTarget:
    """Posts to Slack by incoming webhook or by ``chat.postMessage``; one attempt per ``send``."""

    def __init__(self, name: str, spec: SlackTargetSpec, context: TargetContext) -> None:
        self.name = name
        self._spec = spec
        self._context = context
        self._api_base = spec.api_base or DEFAULT_API_BASE
        if not self._api_base.endswith("/"):
            self._api_base += "/"

    async def send(self, message: Message, *, idempotency_key: str) -> None:
        """Post ``message`` once; ``idempotency_key`` is ignored (Slack has none for these calls)."""
        blocks, text = message_blocks(message), fallback_text(message)
        webhook_url, token, channel = self._spec.webhook_url, self._spec.token, self._spec.channel
        try:
            async with asyncio.timeout(self._context.http.request_timeout_s):
                if webhook_url is not None:
                    await self._post_webhook(webhook_url.get_secret_value(), blocks, text)
                elif token is not None and channel:
                    await self._post_message(token.get_secret_value(), channel, blocks, text)
                else:  # the spec's validator makes this unreachable
                    raise self._error("neither webhookUrl nor token and channel is set")
        except DeliveryError:
            raise
        except NetError as exc:
            raise delivery_error(self._reason(exc.reason), like=exc) from exc
        except SlackApiError as exc:
            raise self._api_error(exc) from exc
        except SlackClientError as exc:
            raise self._error(f"slack_sdk refused the request ({exc})") from exc
        except TRANSLATED as exc:
            net = translate(exc, timeout_s=self._context.http.request_timeout_s)
            raise delivery_error(self._reason(net.reason), like=net) from exc

    def _session(self, url: str) -> aiohttp.ClientSession:
        """The shared session, once ``url`` passed the host policy (IP literals skip the resolver)."""
        self._context.http.policy.check_url(url)
        return self._context.http.session

    async def _post_webhook(self, url: str, blocks: list[dict[str, Any]], text: str) -> None:
        client = AsyncWebhookClient(url, session=self._session(url), retry_handlers=[], logger=sdk_log)
        client.proxy = None  # never a proxy from the environment: it would bypass the address checks
        response = await client.send(text=text, blocks=blocks)
        if 200 <= response.status_code < 300:
            return
        raise self._status_error(response.status_code, response.headers, response.body)

    async def _post_message(self, token: str, channel: str, blocks: list[dict[str, Any]], text: str) -> None:
        client = AsyncWebClient(
            token=token,
            base_url=self._api_base,
            session=self._session(self._api_base + "chat.postMessage"),
            retry_handlers=[],
            logger=sdk_log,
        )
        client.proxy = None  # never a proxy from the environment: it would bypass the address checks
        await client.chat_postMessage(channel=channel, text=text, blocks=blocks)

    def _reason(self, reason: str) -> str:
        return f"slack target {self.name!r}: {reason}"

    def _error(self, reason: str) -> DeliveryError:
        return DeliveryError(self._reason(reason))

    def _retry_after(self, headers: Mapping[str, Any] | None) -> float | None:
        value = headers.get("Retry-After") if headers is not None else None
        return parse_retry_after(str(value) if value is not None else None, now=self._context.clock.now())

    def _status_error(self, status: int, headers: Mapping[str, Any] | None, detail: str) -> DeliveryError:
        retry_after = self._retry_after(headers) if status in RETRY_AFTER_STATUSES else None
        excerpt = " ".join(detail.split())[:CONTEXT_CHARS]
        reason = f"Slack answered HTTP {status}" + (f": {excerpt}" if excerpt else "")
        return status_failure(self._reason(reason), status, retry_after)

    def _api_error(self, exc: SlackApiError) -> DeliveryError:
        response = exc.response
        status = getattr(response, "status_code", None) or getattr(response, "status", None) or 0
        headers = getattr(response, "headers", None)
        data = getattr(response, "data", None)
        code = str(data.get("error") or "") if isinstance(data, Mapping) else ""
        if not code:
            return self._status_error(int(status), headers, "")
        reason = f"Slack answered ok: false, error {code!r} (HTTP {status})"
        if code in RETRYABLE_ERRORS or status_retryable(int(status)):
            return TransientDeliveryError(self._reason(reason), retry_after_s=self._retry_after(headers))
        return self._error(reason)

    async def close(self) -> None:
        """Nothing to release: clients are made per send on the service's session."""


def create(name: str, spec: TargetSpec, context: TargetContext) -> Target:
    """The ``slack`` target called ``name``."""
    if not isinstance(spec, SlackTargetSpec):
        raise TypeError(f"target {name!r}: expected a slack spec, got {type(spec).__name__}")
    return SlackTarget(name, spec, context)
