"""The recording target: a ``Target`` that keeps what it was sent, for tests (STYLE habit 2).

It keeps every attempt in ``sent`` (the message and its idempotency key, in order), so a test of
the dispatcher or the relay can assert what reached people without a receiver. ``fail_next``
makes the next attempts raise a scripted ``DeliveryError``, to drive retries and dead letters.
It is not a ``targets:`` type: tests build it directly.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from sentinel_hooks.delivery.targets.base import DeliveryError, Message


@dataclass(frozen=True)
class Sent:
    """One accepted attempt: the message and the key the dispatcher gave it."""

    message: Message
    idempotency_key: str


class RecordingTarget:
    """Accepts every message (unless told to fail) and remembers it."""

    def __init__(self, name: str = "recording") -> None:
        self.name = name
        self.sent: list[Sent] = []
        self.closed = False
        self._failures: deque[DeliveryError] = deque()

    def fail_next(self, error: DeliveryError, *, times: int = 1) -> None:
        """Refuse the next ``times`` attempts with ``error`` (each is then not recorded as sent)."""
        self._failures.extend([error] * times)

    async def send(self, message: Message, *, idempotency_key: str) -> None:
        """Record ``message``, or raise the next scripted failure."""
        if self._failures:
            raise self._failures.popleft()
        self.sent.append(Sent(message, idempotency_key))

    async def close(self) -> None:
        """Mark the target closed (a test can check that its owner closed it)."""
        self.closed = True
