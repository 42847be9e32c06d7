"""The measured process: a whole Sentinel ``Service`` fired at a steady rate for the whole run.

Run as ``python -m soakbench.service -c sentinel.yaml --rate R --retention-s S --prune-every-s P``.
It builds the service as ``sentinel run`` does (``load_config``, the same logging,
``Service.start``) with one change: the retention pruner's limits are seconds instead of days
(``--retention-s`` for settled callbacks, closed inbox items and idle sessions; 0: no pruner, as
with every ``retention`` limit at 0) and it runs every ``--prune-every-s``, so retention bites
within a minute. The project's ``retention.observationsPerWatcher`` applies as configured.

It prints ``READY``; on ``go`` it pushes one matching event every 1/R s, round robin to the
project's webhook watchers, through ``service.manager.ingest``: the whole fire path (observation,
conditions, dedupe, contract, fan-out, a scripted session that notifies the console target, the
outbox). When stdin closes it prints ``FIRED`` (events pushed, fires accepted, errors, rows
pruned by kind) and stops gracefully. The console target's lines go to /dev/null; protocol lines
go to the original standard output.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, TextIO

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.logs import configure_logging
from sentinel_hooks.retention import Ages, Pruning
from sentinel_hooks.service import Service

IN_FLIGHT = 32  # events being handled at once, at most; the schedule sets the rate


def _protocol() -> TextIO:
    """The original stdout for protocol lines; ``sys.stdout`` (the console target) to /dev/null."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115  (open for the life of the process)
    return out


def _say(out: TextIO, tag: str, data: dict[str, Any]) -> None:
    out.write(f"{tag} {json.dumps(data)}\n")


async def _lines() -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


async def fire(service: Service, rate: float, stop: asyncio.Event) -> dict[str, Any]:
    """Push events at ``rate`` per second until ``stop``; what became of them."""
    watchers = sorted(runner.id for runner in service.manager.runners())
    counts: dict[str, Any] = {"events": 0, "fired": 0, "errors": 0, "firstError": None, "maxLagS": 0.0}
    limit = asyncio.Semaphore(IN_FLIGHT)
    tasks: set[asyncio.Task[None]] = set()
    loop = asyncio.get_running_loop()

    async def push(index: int) -> None:
        try:
            value = {"status": "down", "n": index, "host": f"db-{index % 17}", "note": "disk almost full"}
            outcome = await service.manager.ingest(watchers[index % len(watchers)], value)
            counts["fired"] += outcome.fired
        except Exception as exc:  # counted and reported: the run goes on
            counts["errors"] += 1
            counts["firstError"] = counts["firstError"] or f"{type(exc).__name__}: {exc}"
        finally:
            limit.release()

    start = loop.time()
    index = 0
    while not stop.is_set():
        due = start + index / rate
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=max(0.0, due - loop.time()))
        if stop.is_set():
            break
        await limit.acquire()
        counts["maxLagS"] = max(counts["maxLagS"], loop.time() - due)
        task = loop.create_task(push(index))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        index += 1
    await asyncio.gather(*tasks)
    counts["events"] = index
    counts["seconds"] = loop.time() - start
    return counts


async def run(config_path: Path, rate: float, retention_s: float, prune_every_s: float) -> None:
    out = _protocol()
    config = load_config(config_path)
    configure_logging(config.redactor)
    age = timedelta(seconds=retention_s) if retention_s > 0 else None
    ages = Ages(callbacks=age, inbox=age, sessions=age)
    service = Service(config, pruning=Pruning(ages, interval_s=prune_every_s, first_pass_s=prune_every_s))
    reader = await _lines()
    try:
        await service.start()
        _say(out, "READY", {"url": service.url, "store": type(service.store).__name__})
        if (await reader.readline()).strip() != b"go":
            return
        stop = asyncio.Event()
        firing = asyncio.get_running_loop().create_task(fire(service, rate, stop))
        await reader.read()  # until stdin closes
        stop.set()
        counts = await firing
        counts["pruned"] = {
            sample.labels["kind"]: sample.value
            for family in service.metrics.pruned.collect()
            for sample in family.samples
            if sample.name.endswith("_total")
        }
        counts["at"] = time.time()
        _say(out, "FIRED", counts)
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(service.stop(), timeout=15.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-c", "--config", type=Path, required=True)
    parser.add_argument("--rate", type=float, required=True, help="events per second")
    parser.add_argument("--retention-s", type=float, required=True, help="retention in seconds (0: none)")
    parser.add_argument("--prune-every-s", type=float, default=5.0, help="between pruner passes")
    args = parser.parse_args()
    asyncio.run(run(args.config, args.rate, args.retention_s, args.prune_every_s))


if __name__ == "__main__":
    main()
