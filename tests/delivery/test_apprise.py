"""The apprise target end to end: Apprise's own ``json://`` notifier posting to a real sink on
127.0.0.1 (SPEC.md §16). Every connection a notifier makes is checked against the host policy
(``net.guard``), so these tests can only ever reach loopback addresses they list."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import socket
import warnings
from collections.abc import AsyncIterator
from typing import Any

import apprise
import pytest
from aiohttp import web

from sentinel_hooks.delivery.targets.base import (
    DeliveryError,
    Target,
    TargetContext,
    TransientDeliveryError,
    create_target,
)
from sentinel_hooks.net.client import SafeHttp
from sentinel_hooks.net.guard import guarded
from sentinel_hooks.net.policy import HostPolicy
from tests.delivery.conftest import SPECS, MakeTarget, message, new_http
from tests.delivery.sinks import Sink, text_reply
from tests.net.servers import received


def apprise_spec(*urls: str) -> dict[str, Any]:
    return {"type": "apprise", "urls": list(urls)}


def json_url(sink: Sink, path: str = "/notify", auth: str = "") -> str:
    """Apprise's JSON notifier URL for ``sink`` (``json://`` posts over plain HTTP)."""
    return "json://" + auth + sink.url(path).removeprefix("http://")


def with_http(context: TargetContext, http: SafeHttp, spec: dict[str, Any]) -> Target:
    """The target of ``spec`` using ``http`` (its host policy and timeout) instead of the default."""
    return create_target("t", SPECS.validate_python(spec), dataclasses.replace(context, http=http))


@pytest.fixture
async def other_sink() -> AsyncIterator[Sink]:
    receiver = Sink()
    await receiver.start()
    yield receiver
    await receiver.close()


async def test_the_message_arrives_with_its_text(make_target: MakeTarget, sink: Sink) -> None:
    """Apprise's json:// notifier POSTs the message: title, text with its kind/priority/callback
    line, and the type (warning for a high-priority message)."""
    target = make_target(apprise_spec(json_url(sink)), name="chat")
    await target.send(message(), idempotency_key="01JCALLBACK:chat:notify")
    [received] = sink.received
    body = received.json()
    expected = {
        "title": "Sentinel: gas_high on eth-gas",
        "message": "Gas is 182 gwei (over 150).\n\nnotify · high · callback 01JCALLBACK",
        "type": "warning",
    }
    assert ("POST", "/notify") == (received.method, received.path)
    assert expected == {key: body[key] for key in expected}


async def test_a_resolved_message_is_a_success(make_target: MakeTarget, sink: Sink) -> None:
    """The resolved line is styled as a success."""
    await make_target(apprise_spec(json_url(sink))).send(message(kind="resolved"), idempotency_key="k")
    assert "success" == sink.received[0].json()["type"]


async def test_the_event_loop_runs_while_apprise_sends(make_target: MakeTarget, sink: Sink) -> None:
    """The sink runs on the same event loop and answers only when the test lets it, after seeing the
    request: a notifier that blocked the loop would never get that answer."""
    answer = asyncio.Event()

    async def held(request: web.Request) -> web.StreamResponse:
        await answer.wait()
        return web.Response(text="ok")

    sink.reply = held
    target = make_target(apprise_spec(json_url(sink)))
    sending = asyncio.create_task(target.send(message(), idempotency_key="k"))
    for _ in range(500):
        if sink.received:
            break
        await asyncio.sleep(0.01)
    assert sink.received
    assert not sending.done()
    answer.set()
    await asyncio.wait_for(sending, 5)


async def test_a_failing_service_is_retried_and_says_why(make_target: MakeTarget, sink: Sink) -> None:
    """A 500 from the service: transient (Apprise only says it failed), with Apprise's reason, the
    URL in its masked form, and never the password written in the URL."""
    sink.reply = text_reply("down", status=500)
    url = json_url(sink, "/hooks/T0KENPATH", auth="bob:hunter2pass@")
    target = make_target(apprise_spec(url), name="chat")
    with pytest.raises(TransientDeliveryError) as caught:
        await target.send(message(), idempotency_key="k")
    text = str(caught.value)
    assert text.startswith("apprise target 'chat': json://")
    assert "500" in text
    assert "hunter2pass" not in text
    assert "T0KENPATH" not in text


async def test_a_host_outside_allowed_hosts_is_refused_for_good(make_target: MakeTarget, sink: Sink) -> None:
    """``localhost`` is not in allowedHosts (only 127.0.0.1 is): the connection is refused before it
    is made, nothing arrives, and the error is permanent."""
    url = json_url(sink).replace("127.0.0.1", "localhost")
    with pytest.raises(DeliveryError) as caught:
        await make_target(apprise_spec(url)).send(message(), idempotency_key="k")
    assert not caught.value.retryable
    assert "'localhost' is not in allowedHosts" in str(caught.value)
    assert [] == sink.received


async def test_a_listed_name_never_unlocks_a_loopback_address(context: TargetContext, sink: Sink) -> None:
    """allowedHosts lists ``localhost`` by name: the name passes, but its loopback address is refused
    at connect (as SafeHttp refuses it), and nothing arrives."""
    async with new_http(allowed_hosts=["localhost"]) as http:
        url = json_url(sink).replace("127.0.0.1", "localhost")
        target = with_http(context, http, apprise_spec(url))
        with pytest.raises(DeliveryError) as caught:
            await target.send(message(), idempotency_key="k")
    assert "loopback" in str(caught.value)
    assert not caught.value.retryable
    assert [] == sink.received


async def test_a_retry_goes_only_to_the_urls_that_failed(
    make_target: MakeTarget, sink: Sink, other_sink: Sink
) -> None:
    """Two URLs, the second failing: the retry (same Idempotency-Key) reaches only the second."""
    other_sink.reply = text_reply("down", status=503)
    target: Target = make_target(apprise_spec(json_url(sink), json_url(other_sink)), name="chat")
    with pytest.raises(TransientDeliveryError) as caught:
        await target.send(message(), idempotency_key="k")
    assert "1 of 2 URLs took it" in str(caught.value)
    other_sink.reply = text_reply("ok")
    await target.send(message(), idempotency_key="k")
    assert (1, 2) == (len(sink.received), len(other_sink.received))


async def test_a_service_that_does_not_answer_times_out(context: TargetContext, sink: Sink) -> None:
    """No answer within the request timeout: a transient failure, and the send returns."""
    never = asyncio.Event()

    async def silent(request: web.Request) -> web.StreamResponse:
        await never.wait()
        return web.Response(text="late")

    sink.reply = silent
    async with new_http(request_timeout_s=0.5) as http:
        target = with_http(context, http, apprise_spec(json_url(sink)))
        with pytest.raises(TransientDeliveryError):
            await asyncio.wait_for(target.send(message(), idempotency_key="k"), 5)
    never.set()


async def test_a_udp_notifier_never_reaches_loopback(datagrams: socket.socket) -> None:
    """Apprise's own rsyslog:// notifier under the host policy (``localhost`` listed by name, private
    networks off), as the target would run it: its datagram to a syslog socket on 127.0.0.1 is
    refused, and nothing arrives."""
    notifier = apprise.Apprise()
    assert notifier.add(f"rsyslog://localhost:{datagrams.getsockname()[1]}")
    with guarded(HostPolicy(("localhost",))) as guard:
        result = await notifier.async_notify(body="disk full", title="Sentinel")
    with warnings.catch_warnings():  # Apprise leaves its socket open when sendto raises: not ours
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
    assert not result
    assert "datagram to the name 'localhost'" in guard.refusals[0]
    assert [] == received(datagrams)
