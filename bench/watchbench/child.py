"""The child side of the process protocol: say READY on stdout, run until told to stop.

A child stops when its stdin reaches EOF (the orchestrator closed it, or died), on SIGTERM
or SIGINT (Ctrl-C reaches the whole foreground process group), or after ``max_s`` seconds,
so no benchmark process can outlive the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from typing import Any

READY_PREFIX = "READY "


def announce(details: dict[str, Any]) -> None:
    """Tell the orchestrator this process is ready, with what it needs to know."""
    sys.stdout.write(READY_PREFIX + json.dumps(details) + "\n")
    sys.stdout.flush()


async def until_told_to_stop(max_s: float) -> str:
    """Wait for stdin EOF, SIGTERM/SIGINT or ``max_s``; returns which one happened."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    reason = "max-seconds"

    def on_signal(name: str) -> None:
        nonlocal reason
        reason = name
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum.name)
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def watch_stdin() -> None:
        while await reader.read(4096):
            pass
        on_signal("stdin-eof")

    watcher = loop.create_task(watch_stdin())
    try:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=max_s)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        transport.close()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
    return reason
