"""The baseline: a bare aiohttp handler that takes the same notifications and appends their alerts to SQLite.

Run as ``python -m intakebench.bare --port P --db FILE``. ``POST /hooks/ingest/{id}`` reads the
body, parses it, checks that ``alerts`` is a list of objects and appends each alert (as JSON)
to one SQLite table in one transaction (WAL, ``synchronous = NORMAL``, as Sentinel's store),
then answers 202 ``{"accepted": true, "fired": N}``. No conditions, fires, sessions or
deliveries: the floor of what taking a notification over HTTP and storing it costs. Prints
``READY {"port": P}`` and serves until stdin closes or SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sqlite3
import sys
from pathlib import Path

from aiohttp import web


def open_db(path: Path) -> sqlite3.Connection:
    """The baseline's database: one table of alerts."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE IF NOT EXISTS alerts (watcher TEXT, at REAL, body TEXT)")
    return conn


def handler(conn: sqlite3.Connection) -> web.RequestHandler:  # type: ignore[type-arg]
    """The ingest handler over ``conn``."""

    async def ingest(request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        alerts = body.get("alerts") if isinstance(body, dict) else None
        if not isinstance(alerts, list) or not all(isinstance(a, dict) for a in alerts):
            return web.json_response({"error": "not a notification"}, status=400)
        at = asyncio.get_running_loop().time()
        watcher = request.match_info["id"]
        with conn:
            conn.execute("BEGIN")
            conn.executemany(
                "INSERT INTO alerts VALUES (?, ?, ?)", [(watcher, at, json.dumps(a)) for a in alerts]
            )
        return web.json_response({"accepted": True, "fired": len(alerts)}, status=202)

    return ingest


async def serve(port: int, db: Path) -> None:
    """Serve until stdin closes or a signal arrives."""
    conn = open_db(db)
    app = web.Application(client_max_size=8 << 20)
    app.router.add_post("/hooks/ingest/{id}", handler(conn))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, backlog=1024).start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    closed = loop.create_task(reader.read())
    closed.add_done_callback(lambda _: stop.set())
    print(f"READY {json.dumps({'port': port})}", flush=True)
    await stop.wait()
    closed.cancel()
    await runner.cleanup()
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--db", type=Path, required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.db))


if __name__ == "__main__":
    main()
