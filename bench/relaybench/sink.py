"""The webhook sink: a separate process that records when each delivery arrived.

Run as ``python -m relaybench.sink --out FILE``. It listens on 127.0.0.1 (a free port),
prints ``READY {"port": N}`` on stdout, answers every POST with 200 at once and keeps
``(arrival, callbackId, Idempotency-Key)`` in memory; ``GET /count`` tells how many so far.
``arrival`` is ``time.time()`` taken when the request's body has been read (the wall clock,
the clock the service uses for deadlines). When stdin (a pipe) closes or SIGTERM/SIGINT
arrives it writes the records as JSON lines to FILE and exits. Reading the body and keeping
a tuple is all it does per request, so its own cost hardly delays arrivals.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import stat
import sys
import time
from pathlib import Path

from aiohttp import web

Record = tuple[float, str, str, bool | None]  # arrival, callbackId, Idempotency-Key, the body's page


class Sink:
    """Records every request it is sent; counts the ones whose body is not a webhook message."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.keys: set[str] = set()
        self.malformed = 0

    async def handle(self, request: web.Request) -> web.Response:
        """One delivery: note the arrival, the callbackId of the body and the Idempotency-Key."""
        raw = await request.read()
        arrival = time.time()
        page = None
        try:
            body = json.loads(raw)
            callback_id = str(body["callbackId"])
            page = body.get("page")  # false on a follow-up of the page (SPEC §6.4)
        except (ValueError, KeyError, TypeError, AttributeError):
            self.malformed += 1
            callback_id = ""
        key = request.headers.get("Idempotency-Key", "")
        self.records.append((arrival, callback_id, key, page))
        self.keys.add(key)
        return web.Response(status=200)

    async def count(self, request: web.Request) -> web.Response:
        """``GET /count``: requests so far and distinct Idempotency-Keys among them."""
        return web.json_response({"requests": len(self.records), "keys": len(self.keys)})

    def dump(self, path: Path) -> None:
        """Write the records (JSON lines) and a last line with the count of malformed bodies."""
        with path.open("w", encoding="utf-8") as out:
            for arrival, callback_id, key, page in self.records:
                record = {"at": arrival, "callbackId": callback_id, "key": key, "page": page}
                out.write(json.dumps(record) + "\n")
            out.write(json.dumps({"malformed": self.malformed}) + "\n")


async def _stdin_closed() -> None:
    """Return when the parent closes our stdin (or dies)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while await reader.read(1024):
        pass


async def serve(out: Path) -> None:
    """Listen, announce the port, record until told to stop, then write ``out``."""
    sink = Sink()
    app = web.Application()
    app.router.add_get("/count", sink.count)
    app.router.add_post("/{tail:.*}", sink.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
    await site.start()
    port = runner.addresses[0][1]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    watcher: asyncio.Task[None] | None = None
    if stat.S_ISFIFO(os.fstat(sys.stdin.fileno()).st_mode):  # a parent holds the other end
        watcher = loop.create_task(_stdin_closed())
        watcher.add_done_callback(lambda _: stop.set())
    print(f"READY {json.dumps({'port': port})}", flush=True)
    try:
        await stop.wait()
    finally:
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watcher
        await runner.cleanup()
        sink.dump(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True, help="where to write the records (JSON lines)")
    args = parser.parse_args()
    asyncio.run(serve(args.out))


if __name__ == "__main__":
    main()
