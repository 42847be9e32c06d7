"""The recording target: what tests read from it and how they make it fail."""

from __future__ import annotations

import pytest

from sentinel_hooks.delivery.targets.base import DeliveryError, TransientDeliveryError
from sentinel_hooks.delivery.targets.recording import RecordingTarget, Sent
from tests.delivery.conftest import message


async def test_each_attempt_is_kept_with_its_idempotency_key() -> None:
    """``sent`` holds every accepted message with the key it came with, in order."""
    target = RecordingTarget()
    first, second = message(callback_id="01JA"), message(callback_id="01JB")
    await target.send(first, idempotency_key="01JA:t:notify")
    await target.send(second, idempotency_key="01JB:t:notify")
    assert [Sent(first, "01JA:t:notify"), Sent(second, "01JB:t:notify")] == target.sent


async def test_scripted_failures_refuse_that_many_attempts() -> None:
    """``fail_next(error, times=2)`` raises ``error`` twice, records nothing for them, then accepts."""
    target = RecordingTarget()
    refused = TransientDeliveryError("receiver down", retry_after_s=3.0)
    target.fail_next(refused, times=2)
    raised: list[DeliveryError] = []
    for _ in range(2):
        with pytest.raises(DeliveryError) as caught:
            await target.send(message(), idempotency_key="k")
        raised.append(caught.value)
    await target.send(message(), idempotency_key="k")
    assert ([refused, refused], 1) == (raised, len(target.sent))


async def test_close_is_recorded() -> None:
    """A test can see that the target's owner closed it."""
    target = RecordingTarget()
    await target.close()
    assert target.closed
