"""Whether the store takes writes, checked at most every few seconds: what /readyz answers.

A store can answer reads while refusing every write (a full disk, a file made read-only, a Redis
over its memory limit), and a ready service that cannot record a fire is worse than one that says
it is not ready. ``Store.ping`` therefore writes one tiny record. Readiness probes may poll every
few seconds, several at once, so a success is reused for ``fresh_s`` and concurrent callers share
the check in flight; a failure is never reused, so readiness comes back with the first write
that succeeds.
"""

from __future__ import annotations

import asyncio
import contextlib

from sentinel_hooks.store.base import Store

FRESH_S = 2.0


class WriteCheck:
    """``check()`` raises the store's error when it does not take a write (``Store.ping``)."""

    def __init__(self, store: Store, *, fresh_s: float = FRESH_S) -> None:
        self._store = store
        self._fresh_s = fresh_s
        self._ok_at: float | None = None  # loop time of the last successful write
        self._inflight: asyncio.Task[None] | None = None

    async def check(self) -> None:
        """Return when the store took a write within ``fresh_s`` (now or shortly before)."""
        loop = asyncio.get_running_loop()
        if self._ok_at is not None and loop.time() - self._ok_at < self._fresh_s:
            return
        if self._inflight is None:
            self._inflight = loop.create_task(self._ping())
            self._inflight.add_done_callback(_retrieve)
        await asyncio.shield(self._inflight)

    async def _ping(self) -> None:
        try:
            await self._store.ping()
        except BaseException:
            self._ok_at = None
            raise
        else:
            self._ok_at = asyncio.get_running_loop().time()
        finally:
            self._inflight = None


def _retrieve(task: asyncio.Task[None]) -> None:
    """Mark the outcome seen: every caller may have gone (a probe that timed out)."""
    with contextlib.suppress(BaseException):
        task.exception()
