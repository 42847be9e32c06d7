"""The webhook target against a real receiver on 127.0.0.1: body, signature, headers, failures."""

from __future__ import annotations

import hashlib
import hmac
import socket

import pytest

from sentinel_hooks.delivery.targets.base import DeliveryError
from tests.delivery.conftest import MakeTarget, message
from tests.delivery.sinks import Sink, json_reply, redirect_reply, text_reply


def webhook(url: str, **more: object) -> dict[str, object]:
    return {"type": "webhook", "url": url, **more}


async def failure(make_target: MakeTarget, sink: Sink, **more: object) -> DeliveryError:
    target = make_target(webhook(sink.url("/hook"), **more), name="audit")
    with pytest.raises(DeliveryError) as caught:
        await target.send(message(), idempotency_key="k")
    return caught.value


async def test_body_is_the_spec_json(make_target: MakeTarget, sink: Sink) -> None:
    """The receiver gets POST with {callbackId, watcherId, eventName, priority, message} and no envelope."""
    await make_target(webhook(sink.url("/hook"))).send(message(), idempotency_key="k")
    expected = {
        "callbackId": "01JCALLBACK",
        "watcherId": "eth-gas",
        "eventName": "gas_high",
        "priority": "high",
        "message": "Gas is 182 gwei (over 150).",
    }
    assert [("POST", "/hook", expected)] == [(r.method, r.path, r.json()) for r in sink.received]


async def test_envelope_is_included_when_the_message_carries_it(make_target: MakeTarget, sink: Sink) -> None:
    """A message with an envelope puts it under ``envelope``."""
    envelope = {"type": "sentinel.callback", "version": "1", "payload": {"gwei": 182}}
    await make_target(webhook(sink.url("/hook"))).send(message(envelope=envelope), idempotency_key="k")
    assert envelope == sink.received[0].json()["envelope"]


async def test_signature_verifies_over_the_raw_body(make_target: MakeTarget, sink: Sink) -> None:
    """X-Sentinel-Signature is sha256=HMAC-SHA256(secret, exact body bytes received)."""
    await make_target(webhook(sink.url("/hook"), secret="s3cret-value")).send(message(), idempotency_key="k")
    received = sink.received[0]
    expected = "sha256=" + hmac.new(b"s3cret-value", received.body, hashlib.sha256).hexdigest()
    assert expected == received.headers["X-Sentinel-Signature"]


async def test_no_signature_without_secret(make_target: MakeTarget, sink: Sink) -> None:
    """Without ``secret`` the request carries no signature header."""
    await make_target(webhook(sink.url("/hook"))).send(message(), idempotency_key="k")
    assert "X-Sentinel-Signature" not in sink.received[0].headers


async def test_idempotency_key_is_passed_through(make_target: MakeTarget, sink: Sink) -> None:
    """The Idempotency-Key header is the key given to send, the same on every attempt."""
    target = make_target(webhook(sink.url("/hook")))
    for _ in range(2):
        await target.send(message(), idempotency_key="01JCALLBACK:audit:notify")
    assert ["01JCALLBACK:audit:notify"] * 2 == [r.headers["Idempotency-Key"] for r in sink.received]


async def test_standard_headers(make_target: MakeTarget, sink: Sink) -> None:
    """Content-Type is JSON and User-Agent names Sentinel and its version."""
    await make_target(webhook(sink.url("/hook"))).send(message(), idempotency_key="k")
    headers = sink.received[0].headers
    assert ("application/json", "sentinel-hooks/0.1.0") == (headers["Content-Type"], headers["User-Agent"])


async def test_custom_headers_are_sent(make_target: MakeTarget, sink: Sink) -> None:
    """The spec's headers reach the receiver."""
    spec = webhook(sink.url("/hook"), headers={"Authorization": "Bearer abc", "X-Team": "ops"})
    await make_target(spec).send(message(), idempotency_key="k")
    headers = sink.received[0].headers
    assert ("Bearer abc", "ops") == (headers["Authorization"], headers["X-Team"])


async def test_custom_headers_cannot_replace_the_signature_or_key(
    make_target: MakeTarget, sink: Sink
) -> None:
    """Headers Sentinel sets win over same-named spec headers, whatever their case."""
    spec = webhook(
        sink.url("/hook"),
        secret="s3cret-value",
        headers={"idempotency-key": "x", "content-type": "text/plain"},
    )
    await make_target(spec).send(message(), idempotency_key="k")
    headers = sink.received[0].headers
    assert (["k"], ["application/json"]) == (
        headers.getall("Idempotency-Key"),
        headers.getall("Content-Type"),
    )


async def test_server_error_is_retryable(make_target: MakeTarget, sink: Sink) -> None:
    """500 → retryable, and the message names the target and the status."""
    sink.reply = text_reply("boom", status=500)
    error = await failure(make_target, sink)
    assert (True, True, True) == (error.retryable, "'audit'" in str(error), "HTTP 500" in str(error))


async def test_rate_limit_is_retryable_with_retry_after(make_target: MakeTarget, sink: Sink) -> None:
    """429 with Retry-After: 7 → retryable, retry_after_s 7."""
    sink.reply = text_reply("slow down", status=429, headers={"Retry-After": "7"})
    error = await failure(make_target, sink)
    assert (True, 7.0) == (error.retryable, error.retry_after_s)


async def test_unavailable_honours_retry_after(make_target: MakeTarget, sink: Sink) -> None:
    """503 with Retry-After: 3 → retryable, retry_after_s 3."""
    sink.reply = text_reply("maintenance", status=503, headers={"Retry-After": "3"})
    error = await failure(make_target, sink)
    assert (True, 3.0) == (error.retryable, error.retry_after_s)


async def test_retry_after_is_ignored_on_other_statuses(make_target: MakeTarget, sink: Sink) -> None:
    """500 with Retry-After → retryable without a hint (only 429 and 503 carry one)."""
    sink.reply = text_reply("boom", status=500, headers={"Retry-After": "9"})
    error = await failure(make_target, sink)
    assert (True, None) == (error.retryable, error.retry_after_s)


@pytest.mark.parametrize(
    ("status", "retryable"),
    [(400, False), (401, False), (404, False), (408, True), (422, False), (425, False), (502, True)],
)
async def test_status_decides_retry(
    make_target: MakeTarget, sink: Sink, status: int, retryable: bool
) -> None:
    """5xx, 408 and 429 are retryable; every other 4xx is not."""
    sink.reply = json_reply({"error": "nope"}, status=status)
    assert retryable == (await failure(make_target, sink)).retryable


async def test_redirect_is_refused_and_not_followed(make_target: MakeTarget, sink: Sink) -> None:
    """A 302 is not retryable and the receiver sees only the first request."""
    sink.reply = redirect_reply(sink.url("/elsewhere"))
    error = await failure(make_target, sink)
    assert (False, ["/hook"]) == (error.retryable, [r.path for r in sink.received])


async def test_host_not_allowed_is_not_retryable(make_target: MakeTarget, sink: Sink) -> None:
    """localhost is not in allowedHosts: not retryable, nothing sent."""
    port = sink.url().split(":")[2].rstrip("/")
    target = make_target(webhook(f"http://localhost:{port}/hook"), name="audit")
    with pytest.raises(DeliveryError) as caught:
        await target.send(message(), idempotency_key="k")
    assert (False, True, []) == (caught.value.retryable, "allowedHosts" in str(caught.value), sink.received)


async def test_connection_refused_is_retryable(make_target: MakeTarget) -> None:
    """Nobody listening on the port → retryable."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    target = make_target(webhook(f"http://127.0.0.1:{port}/hook"))
    with pytest.raises(DeliveryError) as caught:
        await target.send(message(), idempotency_key="k")
    assert caught.value.retryable is True


async def test_error_message_hides_path_and_query(make_target: MakeTarget, sink: Sink) -> None:
    """Tokens in the URL path or query stay out of the error message."""
    sink.reply = text_reply("boom", status=500)
    target = make_target(webhook(sink.url("/hook/tok-PATH?key=tok-QUERY")), name="audit")
    with pytest.raises(DeliveryError) as caught:
        await target.send(message(), idempotency_key="k")
    assert (False, False) == ("tok-PATH" in str(caught.value), "tok-QUERY" in str(caught.value))
