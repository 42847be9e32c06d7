"""Every target keeps the Protocol's promise: a message sent once is accepted and arrives once, and a
destination that cannot take it is a ``DeliveryError``, never another exception.

Run against each registered type (Slack both ways, the bot token threading through a store, and
the webhook against real receivers on 127.0.0.1, the console on a stream, the file in a temporary
folder, PagerDuty against a stand-in of its Events API, Apprise through its ``json://`` notifier to
a real receiver) and the recording target.
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.clock import FakeClock
from sentinel_hooks.delivery.targets.base import (
    MODULES,
    DeliveryError,
    Target,
    TargetContext,
    TransientDeliveryError,
    create_target,
)
from sentinel_hooks.delivery.targets.recording import RecordingTarget
from sentinel_hooks.net.client import SafeHttp
from sentinel_hooks.store.sqlite.store import SqliteStore
from tests.delivery.conftest import SPECS, message
from tests.delivery.pagerduty_api import ROUTING_KEY, PagerDutyApi, pagerduty_api
from tests.delivery.sinks import SLACK_POST_MESSAGE_PATH, SLACK_WEBHOOK_PATH, Sink, text_reply

__all__ = ["pagerduty_api"]  # the Events API stand-in's fixture

KINDS = ["slack-webhook", "slack-bot", "webhook", "console", "file", "pagerduty", "apprise", "recording"]


@dataclass(frozen=True)
class Wired:
    """A target, a way to read the callback ids that arrived at its destination, and a way to make
    that destination refuse the next message."""

    target: Target
    arrived: Callable[[], list[str]]
    refuse: Callable[[], None]


def slack_callbacks(slack: Sink, path: str) -> list[str]:
    """Callback ids from the context blocks Slack received on ``path``."""
    ids: list[str] = []
    for received in slack.received:
        if received.path == path:
            blocks = received.json()["blocks"]
            facts = [e["text"] for block in blocks if block["type"] == "context" for e in block["elements"]]
            ids += [fact.removeprefix("*Callback:* ") for fact in facts if fact.startswith("*Callback:*")]
    return ids


@pytest.fixture
def console() -> io.StringIO:
    return io.StringIO()


@pytest.fixture
def context(
    safe_http: SafeHttp, tmp_path: Path, console: io.StringIO, memory_store: SqliteStore
) -> TargetContext:
    """What the service gives targets (with a store, so a bot-token Slack target threads)."""
    return TargetContext(
        http=safe_http, clock=FakeClock(), base_dir=tmp_path, console=console, store=memory_store
    )


def built(spec: dict[str, Any], context: TargetContext) -> Target:
    """The target named ``t`` for a ``targets:`` entry in its sentinel.yaml form, from the registry."""
    return create_target("t", SPECS.validate_python(spec), context)


def refusing(sink: Sink) -> Callable[[], None]:
    def refuse() -> None:
        sink.reply = text_reply("unavailable", status=503)

    return refuse


@pytest.fixture(params=KINDS)
def wired(
    request: pytest.FixtureRequest,
    context: TargetContext,
    sink: Sink,
    slack: Sink,
    console: io.StringIO,
    tmp_path: Path,
    pagerduty_api: PagerDutyApi,
) -> Wired:
    kind: str = request.param
    if kind == "slack-webhook":
        target = built({"type": "slack", "webhookUrl": slack.url(SLACK_WEBHOOK_PATH)}, context)
        return Wired(target, lambda: slack_callbacks(slack, SLACK_WEBHOOK_PATH), refusing(slack))
    if kind == "slack-bot":
        spec: dict[str, Any] = {
            "type": "slack",
            "token": "xoxb-1",
            "channel": "#ops",
            "apiBase": slack.url("/api/"),
        }
        target = built(spec, context)
        return Wired(target, lambda: slack_callbacks(slack, SLACK_POST_MESSAGE_PATH), refusing(slack))
    if kind == "webhook":
        target = built({"type": "webhook", "url": sink.url("/hook")}, context)
        return Wired(target, lambda: [r.json()["callbackId"] for r in sink.received], refusing(sink))
    if kind == "console":
        target = built({"type": "console"}, context)
        return Wired(
            target,
            lambda: [line.rsplit(": ", 1)[1] for line in console.getvalue().splitlines()],
            console.close,
        )
    if kind == "file":
        target = built({"type": "file", "path": "out.jsonl"}, context)
        path = tmp_path / "out.jsonl"
        return Wired(
            target,
            lambda: [json.loads(line)["callbackId"] for line in path.read_text().splitlines()],
            lambda: path.mkdir(),  # a folder where the file should be: the append fails
        )
    if kind == "pagerduty":
        spec = {"type": "pagerduty", "routingKey": ROUTING_KEY, "apiBase": pagerduty_api.base()}
        target = built(spec, context)
        return Wired(
            target,
            lambda: [event["dedup_key"] for event in pagerduty_api.events],
            lambda: pagerduty_api.answer_next(503, times=10),
        )
    if kind == "apprise":
        url = "json://" + sink.url("/n").removeprefix("http://")
        target = built({"type": "apprise", "urls": [url]}, context)
        return Wired(
            target,
            lambda: [r.json()["message"].rsplit("callback ", 1)[1] for r in sink.received],
            refusing(sink),
        )
    recording = RecordingTarget("t")
    return Wired(
        recording,
        lambda: [sent.message.callback_id for sent in recording.sent],
        lambda: recording.fail_next(TransientDeliveryError("refused on purpose")),
    )


def test_every_registered_type_is_covered() -> None:
    """The registry's target types are exactly the ones this suite runs (besides the recording one)."""
    assert {"slack", "webhook", "console", "file", "pagerduty", "apprise"} == set(MODULES)


async def test_message_arrives_exactly_once(wired: Wired) -> None:
    """send returns (accepted) and the destination holds the message once."""
    await wired.target.send(message(callback_id="01JCONTRACT", text="01JCONTRACT"), idempotency_key="k")
    assert ["01JCONTRACT"] == wired.arrived()


async def test_each_send_is_one_arrival(wired: Wired) -> None:
    """Two sends of two messages → two arrivals, in order, nothing merged or repeated."""
    await wired.target.send(message(callback_id="01JA", text="01JA"), idempotency_key="a")
    await wired.target.send(message(callback_id="01JB", text="01JB"), idempotency_key="b")
    assert ["01JA", "01JB"] == wired.arrived()


async def test_target_has_its_name_and_closes(wired: Wired) -> None:
    """The target carries the configured name and close() is safe to call twice."""
    await wired.target.close()
    await wired.target.close()
    assert "t" == wired.target.name


async def test_a_refusing_destination_is_a_delivery_error(wired: Wired) -> None:
    """When the destination cannot take the message, send raises DeliveryError saying whether to retry."""
    wired.refuse()
    with pytest.raises(DeliveryError) as caught:
        await wired.target.send(message(callback_id="01JREFUSED"), idempotency_key="k")
    assert isinstance(caught.value.retryable, bool)


def test_message_to_json_is_its_fields_as_a_detached_dict() -> None:
    """``Message.to_json`` gives every field, with nested dicts copied (as ``dataclasses.asdict``)."""
    sent = dataclasses.replace(message(), envelope={"payload": {"n": [1]}}, extra={"thread": {"ts": "1"}})
    data = sent.to_json()
    assert dataclasses.asdict(sent) == data
    data["envelope"]["payload"]["n"].append(2)
    data["extra"]["thread"]["ts"] = "2"
    assert ({"payload": {"n": [1]}}, {"thread": {"ts": "1"}}) == (sent.envelope, sent.extra)
