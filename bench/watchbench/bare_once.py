"""The start-up floor: a minimal Python process that polls every watcher URL of a project once.

It reads the watchers file with PyYAML's C loader (what any poller must at least do to know its
URLs), then requests each ``endpoint`` once on one aiohttp session, at most ``--concurrency`` at
a time (Sentinel's request pool is 256), reads and parses each body, and exits. No store, no
schedule, no validation. ``bench/startup.py`` times it from exec to the endpoint's first and
last arrival.

Run as ``python -m watchbench.bare_once --watchers FILE``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import aiohttp
import yaml


def urls(watchers_file: Path) -> list[str]:
    """The ``endpoint`` of every watcher in the file's ``watchers:`` list."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    document = yaml.load(watchers_file.read_text(), Loader=loader)
    return [str(w["endpoint"]) for w in document["watchers"]]


async def poll_once(targets: list[str], concurrency: int) -> int:
    """Request every URL once; the number of failed requests."""
    slots = asyncio.Semaphore(concurrency)
    failed = 0

    async def one(session: aiohttp.ClientSession, url: str) -> None:
        nonlocal failed
        async with slots:
            try:
                async with session.get(url) as response:
                    json.loads(await response.read())
            except (aiohttp.ClientError, TimeoutError, ValueError):
                failed += 1

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as session:
        await asyncio.gather(*(one(session, url) for url in targets))
    return failed


def main() -> None:
    """Entry point of the floor process."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--watchers", type=Path, required=True)
    parser.add_argument("--concurrency", type=int, default=256)
    args = parser.parse_args()
    failed = asyncio.run(poll_once(urls(args.watchers), args.concurrency))
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
