"""The ``slack`` target: a Block Kit message through ``slack_sdk``'s async clients (SPEC.md §6.2, §16).

Two ways to post: an incoming webhook (``AsyncWebhookClient``) or a bot token and a channel
(``AsyncWebClient.chat_postMessage``, ``apiBase`` overridable for tests). Both run on the
service's one aiohttp session (``SafeHttp.session``), so the checking resolver and the
no-redirect trace hook apply; because ``slack_sdk`` does not call ``SafeHttp.request``, this
module also checks the URL against the host policy, bounds each send with the request timeout,
turns off the SDK's own retries (the dispatcher retries) and its proxy-from-environment, and
gives it a quiet logger (the SDK logs webhook URLs, which are secrets, at debug level).

With a bot token and a store, a callback's messages form one thread whose root shows how the
fire ended (``slack_threads``); an incoming webhook cannot thread. Slack offers no idempotency
key for these calls: a thread remembers the ts of each delivery key it posted, so a delivery sent
again after its post was recorded is not posted twice, but a retry after a lost answer (and any
retry through an incoming webhook) can post twice. Error messages never show the webhook URL or
token.
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
from sentinel_hooks.delivery.targets.base import (
    DeliveryError,
    Message,
    Target,
    TargetContext,
    TransientDeliveryError,
    delivery_error,
)
from sentinel_hooks.delivery.targets.slack_blocks import (
    CONTEXT_CHARS,
    fallback_text,
    message_blocks,
    root_rendering,
)
from sentinel_hooks.delivery.targets.slack_buttons import Click, approval_buttons, page_buttons, with_status
from sentinel_hooks.delivery.targets.slack_threads import (
    Thread,
    ThreadBook,
    broadcasts,
    outcome_of,
    root_outcomes,
    starts_thread,
)
from sentinel_hooks.delivery.targets.webhook import RETRY_AFTER_STATUSES, status_failure, status_retryable
from sentinel_hooks.errors import StoreError
from sentinel_hooks.net.errors import NetError
from sentinel_hooks.net.response import parse_retry_after
from sentinel_hooks.net.translate import TRANSLATED, translate

DEFAULT_API_BASE = AsyncWebClient.BASE_URL
# Slack API error codes that mean "try again later"; every other code will fail again.
RETRYABLE_ERRORS = frozenset(
    {"ratelimited", "rate_limited", "service_unavailable", "fatal_error", "internal_error", "request_timeout"}
)
FAILURES = (NetError, SlackClientError, StoreError, *TRANSLATED)  # what ``_failure`` translates
Posted = tuple[str, str]  # (channel id, ts) of a posted message
log = logging.getLogger(__name__)
sdk_log = logging.getLogger("sentinel_hooks.delivery.targets.slack.sdk")
sdk_log.setLevel(logging.WARNING)


class SlackTarget:
    """Posts to Slack by incoming webhook or by ``chat.postMessage``; one attempt per ``send``.

    With a bot token and a store (``TargetContext.store``) it threads each callback's messages.
    """

    def __init__(self, name: str, spec: SlackTargetSpec, context: TargetContext) -> None:
        self.name = name
        self.follow_ups = spec.takes_follow_ups()
        self._spec = spec
        self._context = context
        self._api_base = spec.api_base or DEFAULT_API_BASE
        if not self._api_base.endswith("/"):
            self._api_base += "/"
        store = context.store
        self._threads = ThreadBook(name, store) if store is not None and spec.token is not None else None

    async def send(self, message: Message, *, idempotency_key: str) -> None:
        """Post ``message`` once (in its callback's thread when this target threads)."""
        webhook_url, token, channel = self._spec.webhook_url, self._spec.token, self._spec.channel
        try:
            if webhook_url is not None:
                async with asyncio.timeout(self._timeout_s):
                    await self._post_webhook(webhook_url.get_secret_value(), *self._rendered(message))
            elif token is not None and channel:
                client = self._web_client(token.get_secret_value())
                if self._threads is not None:
                    await self._send_threaded(self._threads, client, channel, message, idempotency_key)
                else:
                    async with asyncio.timeout(self._timeout_s):
                        await self._post_message(client, channel, *self._rendered(message))
            else:  # the spec's validator makes this unreachable
                raise self._error("neither webhookUrl nor token and channel is set")
        except DeliveryError:
            raise
        except (SlackApiError, *FAILURES) as exc:
            raise self._failure(exc) from exc

    def _rendered(self, message: Message) -> tuple[list[dict[str, Any]], str]:
        return [*message_blocks(message), *self._actions(message)], fallback_text(message)

    def _actions(self, message: Message) -> list[dict[str, Any]]:
        """The buttons ``message`` carries (SPEC §21): with ``slack.signingSecret`` and a bot token,
        a page (the agent's first notify or the fallback) gets Ack/Resolve/Silence 1h/👍/👎, an
        approval request Approve/Deny; follow-ups and every other message none."""
        if not self._context.slack_buttons or self._spec.token is None or message.follow_up:
            return []
        kind = message.kind.split(".", 1)[0]
        if message.page and kind in ("notify", "fallback") and message.callback_id:
            return page_buttons(self.name, message.callback_id)
        approval_id = message.extra.get("inboxItemId")
        if kind == "escalation" and message.event_name == "approval" and isinstance(approval_id, str):
            return approval_buttons(self.name, approval_id)
        return []

    async def show_click(self, callback_id: str, click: Click, line: str, *, closed: bool) -> None:
        """Update the clicked message in place (``chat.update``): ``line`` says who did what, and
        the buttons go once the page is ``closed``. A thread's root is redrawn from its thread
        (which then remembers both), any other message from the blocks Slack sent with the click.
        Raises ``DeliveryError`` when Slack refuses it."""
        token = self._spec.token
        if token is None or click.channel is None or click.ts is None:
            raise self._error("the clicked message cannot be updated (no bot token, channel or ts)")
        client = self._web_client(token.get_secret_value())
        try:
            if self._threads is not None:
                async with asyncio.timeout(self._timeout_s), self._threads.locks.hold(callback_id):
                    thread = await self._threads.get(callback_id)
                    if thread is not None and (thread.channel, thread.ts) == (click.channel, click.ts):
                        marked = thread.clicked(line, closed=closed)
                        await self._threads.put(marked)
                        blocks, text = root_rendering(marked.root, marked.outcomes, marked.actions)
                        await self._update(client, click.channel, click.ts, blocks, text)
                        return
            blocks = with_status(click.blocks, line, closed=closed)
            async with asyncio.timeout(self._timeout_s):
                await self._update(client, click.channel, click.ts, blocks, click.text or line)
        except DeliveryError:
            raise
        except (SlackApiError, *FAILURES) as exc:
            raise self._failure(exc) from exc

    async def tell(self, click: Click, text: str) -> None:
        """Tell the person who clicked, and only them, ``text`` (``chat.postEphemeral`` in the
        clicked message's channel). Raises ``DeliveryError`` when Slack refuses it."""
        token = self._spec.token
        if token is None or click.channel is None:
            raise self._error("nobody can be told: no bot token or channel")
        client = self._web_client(token.get_secret_value())
        try:
            async with asyncio.timeout(self._timeout_s):
                self._context.http.policy.check_url(self._api_base + "chat.postEphemeral")
                await client.chat_postEphemeral(channel=click.channel, user=click.user, text=text)
        except (SlackApiError, *FAILURES) as exc:
            raise self._failure(exc) from exc

    async def _update(
        self, client: AsyncWebClient, channel: str, ts: str, blocks: list[dict[str, Any]], text: str
    ) -> None:
        self._context.http.policy.check_url(self._api_base + "chat.update")
        await client.chat_update(channel=channel, ts=ts, text=text, blocks=blocks)

    @property
    def _timeout_s(self) -> float:
        return self._context.http.request_timeout_s

    def _failure(self, exc: BaseException) -> DeliveryError:
        """``exc`` (from the SDK, the network or the store) as this target's ``DeliveryError``."""
        if isinstance(exc, SlackApiError):
            return self._api_error(exc)
        if isinstance(exc, NetError):
            return delivery_error(self._reason(exc.reason), like=exc)
        if isinstance(exc, SlackClientError):
            return self._error(f"slack_sdk refused the request ({exc})")
        if isinstance(exc, StoreError):  # the thread could not be read: nothing was posted
            return TransientDeliveryError(self._reason(f"the callback's thread could not be read: {exc}"))
        net = translate(exc, timeout_s=self._timeout_s)
        return delivery_error(self._reason(net.reason), like=net)

    async def _send_threaded(
        self, threads: ThreadBook, client: AsyncWebClient, channel: str, message: Message, key: str
    ) -> None:
        """Post ``message`` in its callback's thread (starting it when it may), remember the
        post, and show its outcome on the root. Waiting for the callback's lock, reading the
        thread and posting share one request timeout, so the post ends within the outbox's
        claim; remembering and updating the root come after it and never fail the message."""
        async with asyncio.timeout(self._timeout_s) as budget, threads.locks.hold(message.callback_id):
            thread = await threads.get(message.callback_id)
            if thread is None and not starts_thread(message.kind):
                await self._post_message(client, channel, *self._rendered(message))  # nothing to reply to
                return
            if thread is None:
                actions = self._actions(message)
                shown = root_rendering(message, root_outcomes(message.kind), actions)
                root = await self._post_message(client, channel, *shown)
                budget.reschedule(None)
                if root is not None:
                    await threads.put(Thread.started(*root, message, key, actions))
                return
            ts = sent_before = thread.posted.get(key)
            if ts is None:
                reply = await self._post_message(
                    client,
                    thread.channel,
                    *self._rendered(message),
                    thread_ts=thread.ts,
                    broadcast=broadcasts(message.kind),
                )
                if reply is None:
                    return
                ts = reply[1]
            budget.reschedule(None)
            if ts == thread.ts:  # this delivery is the root, sent again: it shows its own outcome
                return
            replied = thread.replied(key, ts, message.kind, follow_up=message.follow_up)
            await threads.put(replied)
            # a new outcome goes on the root; a delivery sent again updates it again, in case the
            # first update was lost with the rest of that attempt
            shows = outcome_of(message.kind) is not None and not message.follow_up
            if replied.outcomes != thread.outcomes or (shows and sent_before is not None):
                await self._update_root(client, replied)

    async def _update_root(self, client: AsyncWebClient, thread: Thread) -> None:
        """Show ``thread``'s outcomes on its root; a failure is logged, never the message's."""
        blocks, text = root_rendering(thread.root, thread.outcomes, thread.actions)
        try:
            async with asyncio.timeout(self._timeout_s):
                await self._update(client, thread.channel, thread.ts, blocks, text)
        except (SlackApiError, *FAILURES) as exc:
            reason = self._failure(exc)
            log.warning("updating the thread root of %s failed: %s", thread.root.callback_id, reason)

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

    def _web_client(self, token: str) -> AsyncWebClient:
        client = AsyncWebClient(
            token=token,
            base_url=self._api_base,
            session=self._session(self._api_base + "chat.postMessage"),
            retry_handlers=[],
            logger=sdk_log,
        )
        client.proxy = None  # never a proxy from the environment: it would bypass the address checks
        return client

    async def _post_message(
        self,
        client: AsyncWebClient,
        channel: str,
        blocks: list[dict[str, Any]],
        text: str,
        *,
        thread_ts: str | None = None,
        broadcast: bool = False,
    ) -> Posted | None:
        """``chat.postMessage``; where the message went (None when Slack's answer has no ts,
        so it cannot be replied to). ``broadcast`` shows a thread reply in the channel too."""
        response = await client.chat_postMessage(
            channel=channel,
            text=text,
            blocks=blocks,
            thread_ts=thread_ts,
            reply_broadcast=True if broadcast else None,
        )
        ts, posted_in = response.get("ts"), response.get("channel")
        if not isinstance(ts, str) or not ts:
            log.warning("slack target %r: Slack's answer to chat.postMessage has no ts", self.name)
            return None
        return (posted_in if isinstance(posted_in, str) and posted_in else channel), ts

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
