"""The baseline: a bare aiohttp loop making the same requests on the same schedule as Sentinel.

One plain ``ClientSession`` and one task per simulated watcher. Task ``i`` requests
``/w/<i>`` (``/b/<i>`` with ``--side b``) at ``t0 + offset_i + k * interval`` (the offsets are
the phases Sentinel's scheduler chose in the service run), reads the body and parses it as
JSON, then sleeps until its next slot; a slot already past is skipped, as Sentinel's
coalescing scheduler does. No store, no conditions, no metrics: what any poller pays at minimum.

Run as ``python -m watchbench.bare --port P --schedule FILE --cpu 1``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import os
import sys
import time
from pathlib import Path

import aiohttp

from watchbench.child import announce, until_told_to_stop
from watchbench.procfs import pin_to, rss_kib

START_DELAY_S = 0.5


async def poll_forever(
    session: aiohttp.ClientSession,
    url: str,
    started: asyncio.Future[float],
    offset: float,
    interval_s: float,
    errors: list[int],
) -> None:
    """Request ``url`` at ``t0 + offset + k * interval_s`` until cancelled, ``t0`` the result of
    ``started``."""
    due = await started + offset
    while True:
        await asyncio.sleep(max(0.0, due - time.time()))
        try:
            async with session.get(url) as response:
                json.loads(await response.read())
        except (aiohttp.ClientError, TimeoutError, ValueError):
            errors[0] += 1
        now = time.time()
        due += interval_s
        if due <= now:  # late by a whole interval or more: skip to the next slot
            due += math.ceil((now - due) / interval_s) * interval_s


async def run(port: int, offsets: dict[int, float], interval_s: float, max_s: float, side: str) -> None:
    """Start one task per offset, announce ``t0``, run until told to stop."""
    pid = os.getpid()
    rss_before = rss_kib(pid)
    errors = [0]
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5.0)) as session:
        began = time.monotonic()
        started: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        tasks = [
            asyncio.create_task(
                poll_forever(
                    session, f"http://127.0.0.1:{port}/{side}/{i}", started, offset, interval_s, errors
                )
            )
            for i, offset in offsets.items()
        ]
        await asyncio.sleep(0)  # every task takes its first step: waiting for the start
        gc.freeze()  # as Sentinel does once loaded: no full collection walks a million waiting tasks
        # Waking the tasks costs about what making them did (seconds at a million): the schedule
        # begins after both, or its first slots would all be late and the window would measure
        # the backlog being caught up.
        t0 = time.time() + START_DELAY_S + (time.monotonic() - began)
        started.set_result(t0)
        announce({"pid": pid, "t0": t0, "rss_before_kib": rss_before, "rss_loaded_kib": rss_kib(pid)})
        try:
            reason = await until_told_to_stop(max_s)
        finally:
            for task in tasks:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*tasks, return_exceptions=True)
    sys.stderr.write(f"bench: bare loop stopping ({reason}); {errors[0]} request error(s)\n")


def main() -> None:
    """Entry point of the baseline process."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--schedule", type=Path, required=True, help="JSON {interval_s, offsets}")
    parser.add_argument("--cpu", type=int, default=None, help="pin to this CPU")
    parser.add_argument("--side", default="w", help="the endpoint's path prefix (b: beside the service)")
    parser.add_argument("--max-s", type=float, default=600.0, help="exit after this long regardless")
    args = parser.parse_args()
    pin_to(args.cpu)
    schedule = json.loads(args.schedule.read_text())
    offsets = {int(i): float(offset) for i, offset in schedule["offsets"].items()}
    asyncio.run(run(args.port, offsets, float(schedule["interval_s"]), args.max_s, args.side))


if __name__ == "__main__":
    main()
