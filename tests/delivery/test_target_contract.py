"""Every target keeps the Protocol's promise: a message sent once is accepted and arrives once."""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.delivery.target import MODULES, Target
from tests.delivery.conftest import MakeTarget, message
from tests.delivery.sinks import SLACK_POST_MESSAGE_PATH, SLACK_WEBHOOK_PATH, Sink


@dataclass(frozen=True)
class Wired:
    """A target and a way to read the callback ids that arrived at its sink."""

    target: Target
    arrived: Callable[[], list[str]]


def slack_callbacks(slack: Sink, path: str) -> list[str]:
    """Callback ids from the context blocks Slack received on ``path``."""
    ids: list[str] = []
    for received in slack.received:
        if received.path == path:
            facts = [e["text"] for e in received.json()["blocks"][1]["elements"]]
            ids += [fact.removeprefix("*Callback:* ") for fact in facts if fact.startswith("*Callback:*")]
    return ids


@pytest.fixture(params=["slack-webhook", "slack-bot", "webhook", "console", "file"])
def wired(
    request: pytest.FixtureRequest,
    make_target: MakeTarget,
    sink: Sink,
    slack: Sink,
    console: io.StringIO,
    tmp_path: Path,
) -> Wired:
    kind: str = request.param
    if kind == "slack-webhook":
        target = make_target({"type": "slack", "webhookUrl": slack.url(SLACK_WEBHOOK_PATH)})
        return Wired(target, lambda: slack_callbacks(slack, SLACK_WEBHOOK_PATH))
    if kind == "slack-bot":
        spec: dict[str, Any] = {
            "type": "slack",
            "token": "xoxb-1",
            "channel": "#ops",
            "apiBase": slack.url("/api/"),
        }
        return Wired(make_target(spec), lambda: slack_callbacks(slack, SLACK_POST_MESSAGE_PATH))
    if kind == "webhook":
        target = make_target({"type": "webhook", "url": sink.url("/hook")})
        return Wired(target, lambda: [r.json()["callbackId"] for r in sink.received])
    if kind == "console":
        target = make_target({"type": "console"})
        return Wired(target, lambda: [line.rsplit(": ", 1)[1] for line in console.getvalue().splitlines()])
    target = make_target({"type": "file", "path": "out.jsonl"})
    path = tmp_path / "out.jsonl"
    return Wired(target, lambda: [json.loads(line)["callbackId"] for line in path.read_text().splitlines()])


def test_every_registered_type_is_covered() -> None:
    """The registry's target types are exactly the ones this suite runs."""
    assert {"slack", "webhook", "console", "file"} == set(MODULES)


async def test_message_arrives_exactly_once(wired: Wired) -> None:
    """send returns (accepted) and the sink holds the message once."""
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


def test_message_to_json_is_its_fields_as_a_detached_dict() -> None:
    """``Message.to_json`` gives every field, with nested dicts copied (as ``dataclasses.asdict``)."""
    sent = dataclasses.replace(message(), envelope={"payload": {"n": [1]}}, extra={"thread": {"ts": "1"}})
    data = sent.to_json()
    assert dataclasses.asdict(sent) == data
    data["envelope"]["payload"]["n"].append(2)
    data["extra"]["thread"]["ts"] = "2"
    assert ({"payload": {"n": [1]}}, {"thread": {"ts": "1"}}) == (sent.envelope, sent.extra)
