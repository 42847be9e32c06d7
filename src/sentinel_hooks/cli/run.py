"""``sentinel run``: one ``Service`` as the process, from the first signal to the last.

The service is built and started here (SIGTERM and SIGINT cancel a start that is still under way),
announced on stderr with where its API listens, reloaded on SIGHUP and stopped gracefully on
SIGTERM or SIGINT, given ``STOP_TIMEOUT_S`` to finish. Logging and the process's hardening are set
up before the service is built, and the garbage collector is off while it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
from pathlib import Path

from sentinel_hooks.background import cancel_and_wait
from sentinel_hooks.config.loader import load_streamed
from sentinel_hooks.hardening import protect_process
from sentinel_hooks.service import Service, listening

log = logging.getLogger(__name__)

STOP_TIMEOUT_S = 8.0


async def serve(config_file: Path) -> int:
    """``sentinel run``: start, serve until SIGTERM/SIGINT, stop gracefully; SIGHUP reloads.

    SIGTERM and SIGINT are handled from the first moment: one that arrives while the service
    is starting (reading thousands of watchers, waiting for a slow store) cancels the start,
    and what was started is stopped as after any failed start (in cluster mode: leases taken
    so far are released, so another replica need not wait for them to expire).

    The garbage collector is off while the watchers are loaded and started: that work creates
    long-lived objects almost only (parsing 3,000 watchers leaves about 200 objects of cyclic
    garbage), and with CPython's default thresholds it ran hundreds of collections, the full
    ones walking every watcher loaded so far (10,000 watchers: 560 collections, seconds of
    CPU). The start freezes what it made slice by slice and ends with a collection of what is
    left and a freeze (``heap.freeze_young``, ``freeze_heap``).
    """
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stopping.set)
    loop.add_signal_handler(signal.SIGINT, stopping.set)
    service = await _started_unless_stopped(config_file, stopping)
    if service is None:
        log.info("stopped before the start finished")
        sys.stderr.write("sentinel: stopped before the start finished\n")
        return 0
    reloads: set[asyncio.Task[object]] = set()

    def reload() -> None:
        task: asyncio.Task[object] = loop.create_task(service.reload())
        reloads.add(task)
        task.add_done_callback(reloads.discard)

    loop.add_signal_handler(signal.SIGHUP, reload)
    sys.stderr.write(
        f"sentinel: listening on {listening(service.bound, service.url)} — "
        f"{service.watcher_count()} watcher(s), "
        f"store {service.store.__class__.__name__}; Ctrl-C to stop\n"
    )
    sys.stderr.flush()
    await stopping.wait()
    log.info("stopping")
    try:
        await asyncio.wait_for(service.stop(), timeout=STOP_TIMEOUT_S)
    except TimeoutError:
        log.error("graceful stop took longer than %.0fs; exiting", STOP_TIMEOUT_S)
    return 0


async def _started_unless_stopped(config_file: Path, stopping: asyncio.Event) -> Service | None:
    """The started service, or None when ``stopping`` was set first (the start is cancelled
    and undone by ``_started``); a failed start raises its error."""
    gc.disable()
    try:
        starting = asyncio.ensure_future(_started(config_file))
        stop_asked = asyncio.ensure_future(stopping.wait())
        try:
            await asyncio.wait({starting, stop_asked}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop_asked.cancel()
        if starting.done():
            return starting.result()
        await cancel_and_wait(starting)
        return None
    finally:
        gc.enable()


async def _started(config_file: Path) -> Service:
    """Load the config and start the service (stopped again if the start fails)."""
    config, chunks = load_streamed(config_file)
    from sentinel_hooks.logs import configure_logging

    configure_logging(config.redactor)
    protect_process()  # before any command runs: its environment and memory are closed to them
    state_dir = os.environ.get("SENTINEL_STATE_DIR")
    service = Service(config, state_dir=Path(state_dir) if state_dir else None, watcher_chunks=chunks)
    try:
        await service.start()
    except BaseException:
        with contextlib.suppress(Exception):
            await service.stop()
        raise
    return service
