"""The watched endpoint: an aiohttp server on 127.0.0.1 answering ``/w/<i>`` and ``/b/<i>`` with small JSON.

It records when each request arrived (``time.time()`` at the handler) and for which watcher
index, so the orchestrator can count polls and compute each poll's lag against the schedule
the measured process reports. Sentinel's watchers request ``/w/<i>``; the bare loop requests
``/b/<i>`` when both run at once (``--together``), so each side's arrivals stay apart.
``GET /_bench/arrivals?since=&until=&side=w|b`` returns one side's; ``POST /_bench/clear``
forgets them between runs.

Run as ``python -m watchbench.endpoint --cpu 0 --max-s 3600``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from array import array

from aiohttp import web

from watchbench.child import announce, until_told_to_stop
from watchbench.procfs import pin_to

BODY = b'{"status": "ok", "value": 42}'


class Arrivals:
    """Watcher index and arrival time of every request, in compact arrays."""

    def __init__(self) -> None:
        self.ids = array("l")
        self.at = array("d")

    def clear(self) -> None:
        self.ids = array("l")
        self.at = array("d")

    def between(self, since: float, until: float) -> dict[str, list[float] | list[int]]:
        ids: list[int] = []
        at: list[float] = []
        for index, when in zip(self.ids, self.at, strict=True):
            if since <= when < until:
                ids.append(index)
                at.append(when)
        return {"ids": ids, "at": at}


def build_app(arrivals: dict[str, Arrivals]) -> web.Application:
    """The endpoint's routes."""

    async def watched(request: web.Request) -> web.Response:
        side = arrivals[request.match_info["side"]]
        side.at.append(time.time())
        side.ids.append(int(request.match_info["index"]))
        return web.Response(body=BODY, content_type="application/json")

    async def report(request: web.Request) -> web.Response:
        since = float(request.query.get("since", "0"))
        until = float(request.query.get("until", "inf"))
        side = arrivals[request.query.get("side", "w")]
        return web.Response(text=json.dumps(side.between(since, until)), content_type="application/json")

    async def clear(request: web.Request) -> web.Response:
        for side in arrivals.values():
            side.clear()
        return web.Response(status=204)

    app = web.Application()
    app.router.add_get(r"/{side:[wb]}/{index:\d+}", watched)
    app.router.add_get("/_bench/arrivals", report)
    app.router.add_post("/_bench/clear", clear)
    return app


async def serve(max_s: float) -> None:
    """Listen on a free port of 127.0.0.1, say READY with it, serve until told to stop."""
    runner = web.AppRunner(
        build_app({"w": Arrivals(), "b": Arrivals()}), access_log=None, shutdown_timeout=1.0
    )
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
        await site.start()
        port = int(runner.addresses[0][1])
        announce({"port": port})
        await until_told_to_stop(max_s)
    finally:
        await runner.cleanup()


def main() -> None:
    """Entry point of the endpoint process."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cpu", type=int, default=None, help="pin to this CPU")
    parser.add_argument("--max-s", type=float, default=3600.0, help="exit after this long regardless")
    args = parser.parse_args()
    pin_to(args.cpu)
    asyncio.run(serve(args.max_s))


if __name__ == "__main__":
    main()
