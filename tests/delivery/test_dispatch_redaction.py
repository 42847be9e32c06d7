"""Deliveries are stored with secrets masked, and only masked copies are made when one is in them."""

from __future__ import annotations

from datetime import UTC, datetime

from sentinel_hooks.clock import FakeClock
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import DeliverySpec
from sentinel_hooks.delivery.dispatch import Dispatcher
from sentinel_hooks.delivery.targets.base import Message
from sentinel_hooks.store import Delivery, Store

T0 = datetime(2026, 1, 1, tzinfo=UTC)
KEY = "hk_8f3Kq9ZpW2xVb7Lm"


async def _nowhere(delivery: Delivery, error: str) -> None:
    """Nothing is sent in these tests."""


def _message(text: str, payload: object) -> Message:
    return Message("cb1", "w", "ev", "high", "fanout", text, payload=payload)


def test_a_secret_in_a_message_is_masked_in_every_delivery_and_nothing_else_changes(
    memory_store: Store,
) -> None:
    dispatcher = Dispatcher(
        store=memory_store,
        clock=FakeClock(T0),
        targets={},
        spec=DeliverySpec(),
        dead_letter=_nowhere,
        redactor=Redactor([KEY]),
    )
    secret = _message(f"key={KEY}", {"url": f"http://h/?key={KEY}", "n": [1, {KEY: 2}]})
    plain = _message("all quiet", {"url": "http://h/", "n": [1, {"k": 2}]})
    masked = dispatcher.new_deliveries(secret, ["a", "b"], "fanout", at=T0)
    kept = dispatcher.new_deliveries(plain, ["a"], "fanout", at=T0)
    assert [d.message for d in masked] == [
        {**secret.to_json(), "text": "key=***", "payload": {"url": "http://h/?key=***", "n": [1, {"***": 2}]}}
    ] * 2
    assert KEY not in str([d.message for d in masked])
    assert kept[0].message == plain.to_json()
    kept[0].message["payload"]["n"].append(3)  # the stored body is the delivery's own
    assert plain.payload == {"url": "http://h/", "n": [1, {"k": 2}]}
