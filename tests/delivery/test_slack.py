"""The slack target against a fake Slack on 127.0.0.1: Block Kit, both ways to post, errors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from sentinel_hooks.delivery.targets.base import DeliveryError, TargetContext, create_target
from sentinel_hooks.net.client import SafeHttp
from tests.delivery.conftest import SPECS, MakeTarget, message, new_http
from tests.delivery.sinks import (
    SLACK_POST_MESSAGE_PATH,
    SLACK_WEBHOOK_PATH,
    Sink,
    json_reply,
    redirect_reply,
    text_reply,
)

TOKEN = "xoxb-test-token-123"


def incoming(slack: Sink) -> dict[str, Any]:
    return {"type": "slack", "webhookUrl": slack.url(SLACK_WEBHOOK_PATH)}


def bot(slack: Sink, channel: str = "#ops") -> dict[str, Any]:
    return {"type": "slack", "token": TOKEN, "channel": channel, "apiBase": slack.url("/api/")}


async def failure(make_target: MakeTarget, spec: dict[str, Any]) -> DeliveryError:
    with pytest.raises(DeliveryError) as caught:
        await make_target(spec, name="oncall").send(message(), idempotency_key="k")
    return caught.value


async def test_webhook_posts_blocks_and_text(make_target: MakeTarget, slack: Sink) -> None:
    """The incoming webhook gets one POST with a section, a context block and the plain text."""
    await make_target(incoming(slack)).send(message(), idempotency_key="k")
    body = slack.received[0].json()
    assert ("POST", SLACK_WEBHOOK_PATH, "Gas is 182 gwei (over 150).", ["section", "context"]) == (
        slack.received[0].method,
        slack.received[0].path,
        body["text"],
        [block["type"] for block in body["blocks"]],
    )


async def test_blocks_hold_text_and_facts(make_target: MakeTarget, slack: Sink) -> None:
    """The section is mrkdwn text; the context names priority, event, watcher, callback and kind."""
    await make_target(incoming(slack)).send(message(kind="fallback"), idempotency_key="k")
    section, context = slack.received[0].json()["blocks"]
    expected_facts = [
        "*Priority:* high",
        "*Event:* gas_high",
        "*Watcher:* eth-gas",
        "*Callback:* 01JCALLBACK",
        "*Kind:* fallback",
    ]
    assert ({"type": "mrkdwn", "text": "Gas is 182 gwei (over 150)."}, expected_facts) == (
        section["text"],
        [element["text"] for element in context["elements"]],
    )


async def test_mrkdwn_specials_are_escaped(make_target: MakeTarget, slack: Sink) -> None:
    """&, < and > in observed text cannot form links or mentions."""
    await make_target(incoming(slack)).send(message(text="a<b & <!channel>"), idempotency_key="k")
    body = slack.received[0].json()
    escaped = "a&lt;b &amp; &lt;!channel&gt;"
    assert (escaped, escaped) == (body["blocks"][0]["text"]["text"], body["text"])


async def test_long_text_is_cut_to_the_section_limit(make_target: MakeTarget, slack: Sink) -> None:
    """A section holds at most 3000 characters (Slack refuses more); the plain text keeps it all."""
    await make_target(incoming(slack)).send(message(text="x" * 5000), idempotency_key="k")
    body = slack.received[0].json()
    assert (3000, 5000) == (len(body["blocks"][0]["text"]["text"]), len(body["text"]))


async def test_bot_posts_to_chat_post_message(make_target: MakeTarget, slack: Sink) -> None:
    """A token target POSTs chat.postMessage with the channel, the blocks and a bearer token."""
    await make_target(bot(slack)).send(message(), idempotency_key="k")
    received = slack.received[0]
    body = received.json()
    assert (SLACK_POST_MESSAGE_PATH, f"Bearer {TOKEN}", "#ops", "Gas is 182 gwei (over 150).", 2) == (
        received.path,
        received.headers["Authorization"],
        body["channel"],
        body["text"],
        len(body["blocks"]),
    )


async def test_channel_not_found_is_not_retryable(make_target: MakeTarget, slack: Sink) -> None:
    """ok: false, error channel_not_found → not retryable, the code in the message."""
    slack.reply = json_reply({"ok": False, "error": "channel_not_found"})
    error = await failure(make_target, bot(slack))
    assert (False, True) == (error.retryable, "channel_not_found" in str(error))


async def test_ratelimited_is_retryable_with_the_hint(make_target: MakeTarget, slack: Sink) -> None:
    """Web API 429 ok: false ratelimited with Retry-After: 12 → retryable, retry_after_s 12."""
    slack.reply = json_reply({"ok": False, "error": "ratelimited"}, status=429, headers={"Retry-After": "12"})
    error = await failure(make_target, bot(slack))
    assert (True, 12.0) == (error.retryable, error.retry_after_s)


async def test_ratelimited_code_alone_is_retryable(make_target: MakeTarget, slack: Sink) -> None:
    """ok: false ratelimited on a 200 is still retryable."""
    slack.reply = json_reply({"ok": False, "error": "ratelimited"})
    assert (await failure(make_target, bot(slack))).retryable is True


async def test_web_api_server_error_is_retryable(make_target: MakeTarget, slack: Sink) -> None:
    """A Web API 502 with an HTML body → retryable."""
    slack.reply = text_reply("<html>bad gateway</html>", status=502)
    assert (await failure(make_target, bot(slack))).retryable is True


async def test_webhook_rate_limit_is_retryable_with_the_hint(make_target: MakeTarget, slack: Sink) -> None:
    """Incoming webhook 429 with Retry-After: 30 → retryable, retry_after_s 30, one request only."""
    slack.reply = text_reply("rate_limited", status=429, headers={"Retry-After": "30"})
    error = await failure(make_target, incoming(slack))
    assert (True, 30.0, 1) == (error.retryable, error.retry_after_s, len(slack.received))


async def test_webhook_server_error_is_tried_once(make_target: MakeTarget, slack: Sink) -> None:
    """500 → retryable, and slack_sdk did not retry by itself (the dispatcher owns retries)."""
    slack.reply = text_reply("internal_error", status=500)
    error = await failure(make_target, incoming(slack))
    assert (True, 1) == (error.retryable, len(slack.received))


async def test_dropped_connection_is_retryable_and_tried_once(make_target: MakeTarget, slack: Sink) -> None:
    """The connection closes without an answer → retryable; slack_sdk's own retry is off (one request)."""

    async def drop(request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        request.transport.close()
        return web.Response(text="never sent")

    slack.reply = drop
    error = await failure(make_target, incoming(slack))
    assert (True, 1) == (error.retryable, len(slack.received))


async def test_webhook_client_error_is_not_retryable(make_target: MakeTarget, slack: Sink) -> None:
    """Incoming webhook 404 channel_not_found → not retryable."""
    slack.reply = text_reply("channel_not_found", status=404)
    error = await failure(make_target, incoming(slack))
    assert (False, True) == (error.retryable, "channel_not_found" in str(error))


@pytest.mark.parametrize("way", ["incoming", "bot"])
async def test_redirect_is_refused(make_target: MakeTarget, slack: Sink, way: str) -> None:
    """A 302 is not followed (the session's trace hook), not retryable, one request at the sink."""
    slack.reply = redirect_reply(slack.url("/elsewhere"))
    spec = incoming(slack) if way == "incoming" else bot(slack)
    error = await failure(make_target, spec)
    assert (False, 1) == (error.retryable, len(slack.received))


@pytest.mark.parametrize("way", ["incoming", "bot"])
async def test_host_not_allowed_is_not_retryable(make_target: MakeTarget, slack: Sink, way: str) -> None:
    """localhost is not in allowedHosts: checked before slack_sdk sends, nothing reaches the sink."""
    local = slack.url("/").replace("127.0.0.1", "localhost")
    spec = (
        {"type": "slack", "webhookUrl": local + SLACK_WEBHOOK_PATH.lstrip("/")}
        if way == "incoming"
        else {"type": "slack", "token": TOKEN, "channel": "#ops", "apiBase": local + "api/"}
    )
    error = await failure(make_target, spec)
    assert (False, True, []) == (error.retryable, "allowedHosts" in str(error), slack.received)


@pytest.mark.parametrize("way", ["incoming", "bot"])
async def test_unlisted_ip_literal_is_refused_before_sending(
    slack: Sink, context: TargetContext, way: str
) -> None:
    """127.0.0.1 not in allowedHosts: refused by the URL check (IP literals never reach the resolver)."""
    async with new_http(allowed_hosts=["hooks.example.com"]) as http:
        ctx = TargetContext(http=http, clock=context.clock, base_dir=context.base_dir)
        spec = SPECS.validate_python(incoming(slack) if way == "incoming" else bot(slack))
        with pytest.raises(DeliveryError) as caught:
            await create_target("oncall", spec, ctx).send(message(), idempotency_key="k")
    assert (False, []) == (caught.value.retryable, slack.received)


async def test_errors_never_show_the_webhook_url(make_target: MakeTarget, slack: Sink) -> None:
    """The webhook URL is a secret: a failure message does not contain it."""
    slack.reply = text_reply("no_service", status=404)
    error = await failure(make_target, incoming(slack))
    assert False is (SLACK_WEBHOOK_PATH in str(error))


@pytest.fixture
async def impatient_http() -> AsyncIterator[SafeHttp]:
    async with new_http(request_timeout_s=0.3) as client:
        yield client


async def test_no_answer_in_time_is_retryable(
    make_target: MakeTarget, slack: Sink, impatient_http: SafeHttp, context: TargetContext
) -> None:
    """A Slack that never answers → retryable once the request timeout passes."""
    never = asyncio.Event()

    async def hang(request: web.Request) -> web.StreamResponse:
        await never.wait()
        return web.Response(text="ok")

    slack.reply = hang
    ctx = TargetContext(http=impatient_http, clock=context.clock, base_dir=context.base_dir)
    with pytest.raises(DeliveryError) as caught:
        await make_target(incoming(slack), ctx=ctx).send(message(), idempotency_key="k")
    assert caught.value.retryable is True


async def test_unstarted_http_is_a_clear_error(
    make_target: MakeTarget, slack: Sink, context: TargetContext
) -> None:
    """Sending before SafeHttp started raises, rather than letting slack_sdk open its own session."""
    ctx = TargetContext(http=new_http(), clock=context.clock, base_dir=context.base_dir)
    with pytest.raises(RuntimeError, match="not started"):
        await make_target(incoming(slack), ctx=ctx).send(message(), idempotency_key="k")
