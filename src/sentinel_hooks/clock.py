"""Injected time, so logic never calls ``datetime.now()`` and tests control the clock."""

from __future__ import annotations

import functools
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """Source of the current instant (timezone-aware UTC) and of waiting."""

    def now(self) -> datetime: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real wall clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        import asyncio  # here: the CLI's commands that only read the time need no event loop

        await asyncio.sleep(seconds)


class FakeClock:
    """A clock that moves only when told to; ``sleep`` advances it instantly."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)

    async def sleep(self, seconds: float) -> None:
        import asyncio

        self.advance(seconds)
        await asyncio.sleep(0)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def to_ms(at: datetime) -> int:
    """Whole milliseconds since the epoch for an aware datetime (``store.records.to_epoch_ms``
    also refuses a naive one).

    Exact: ``int(at.timestamp() * 1000)`` went through a float, which lands just under some
    whole milliseconds (137438953.471 s gave …470 ms), so an instant stored and read back could
    come back a millisecond earlier each time.
    """
    return (at - _EPOCH) // _MS


def from_ms(ms: int) -> datetime:
    """Aware UTC datetime from milliseconds since the epoch (exact, as ``to_ms``)."""
    return _EPOCH + timedelta(milliseconds=ms)


@functools.lru_cache(maxsize=4096)
def iso(at: datetime) -> str:
    """ISO 8601 UTC with milliseconds and ``Z`` (the API's time format).

    Formatted field by field rather than with ``strftime``, and remembered for the last few
    thousand instants: every stored record's instants go through here, thousands of times a
    second under load, and the records of one batch share most of theirs (equal instants in
    any time zone render the same, so sharing an entry between them is right).
    """
    if at.tzinfo is not UTC:
        at = at.astimezone(UTC)
    return (  # four digits of year, also before 1000: ISO 8601, and what fromisoformat reads back
        f"{at.year:04d}-{at.month:02d}-{at.day:02d}T{at.hour:02d}:{at.minute:02d}:{at.second:02d}"
        f".{at.microsecond // 1000:03d}Z"
    )


def monotonic_s() -> float:
    """Seconds from a monotonic source, for measuring durations."""
    return time.monotonic()
