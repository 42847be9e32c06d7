"""Whether the store takes writes, checked at most every few seconds: what /readyz answers.

A store can answer reads while refusing every write (a full disk, a file made read-only, a Redis
over its memory limit), and a ready service that cannot record a fire is worse than one that says
it is not ready. ``Store.ping`` therefore writes one tiny record. Readiness probes may poll every
few seconds, several at once, so a success is reused for ``fresh_s`` and concurrent callers share
the check in flight; a failure is never reused, so readiness comes back with the first write
that succeeds.

The store's error names its file or server, which an unauthenticated probe must not read, so the
cause goes to the log instead: once when writes start failing (or the cause changes), once when
they succeed again, however often the store is probed meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sentinel_hooks.store.base import LifecycleStore

log = logging.getLogger(__name__)

FRESH_S = 2.0


class WriteCheck:
    """``check()`` raises the store's error when it does not take a write (``Store.ping``)."""

    def __init__(self, store: LifecycleStore, *, fresh_s: float = FRESH_S) -> None:
        self._store = store
        self._fresh_s = fresh_s
        self._ok_at: float | None = None  # loop time of the last successful write
        self._inflight: asyncio.Task[None] | None = None
        self._failure: str | None = None  # the cause last logged, while writes fail

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
        except Exception as exc:
            self._ok_at = None
            self._note_failure(str(exc))
            raise
        except BaseException:
            self._ok_at = None
            raise
        else:
            self._ok_at = asyncio.get_running_loop().time()
            if self._failure is not None:
                log.info("the store takes writes again; the service is ready")
                self._failure = None
        finally:
            self._inflight = None

    def _note_failure(self, cause: str) -> None:
        if cause != self._failure:
            log.error("the store does not take writes, so the service is not ready: %s", cause)
            self._failure = cause


def _retrieve(task: asyncio.Task[None]) -> None:
    """Mark the outcome seen: every caller may have gone (a probe that timed out)."""
    with contextlib.suppress(BaseException):
        task.exception()
