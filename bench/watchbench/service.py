"""The measured Sentinel process: a real ``Service`` polling the endpoint.

For a fair "before" memory reading it first starts and stops a service on an empty copy of
the project (every module imported, pools and the store opened once), reads RSS, then loads
the N watchers as ``sentinel run`` does (``load_config`` + ``Service.start``), writes each
watcher's schedule (APScheduler interval trigger start and interval) for the lag
computation (with a Redis store, once every runner started with its lease), says READY and
runs until told to stop, then stops the service gracefully.

Run as ``python -m watchbench.service --project DIR --n N --cpu 1``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import inspect
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from apscheduler.triggers.interval import IntervalTrigger

from sentinel_hooks.config.loader import LoadedConfig, load_config
from sentinel_hooks.service import Service
from watchbench.child import announce, until_told_to_stop
from watchbench.procfs import pin_to, rss_kib
from watchbench.project import Project


def write_schedule(service: Service, path: Path) -> int:
    """Each watcher's first scheduled run (epoch seconds) and the interval; returns how many."""
    starts: dict[str, float] = {}
    interval_s = 0.0
    for job in service.scheduler.get_jobs():
        trigger = job.trigger
        if not isinstance(trigger, IntervalTrigger) or not job.id.startswith("w"):
            continue
        starts[job.id[1:]] = trigger.start_date.timestamp()
        interval_s = trigger.interval.total_seconds()
    path.write_text(json.dumps({"interval_s": interval_s, "starts": starts}))
    return len(starts)


def compiled() -> dict[str, bool]:
    """``load_config``'s ``compiled=True``, as ``sentinel run`` loads, where the code measured
    (``--src``) has the compiled cache; nothing where it is older."""
    return {"compiled": True} if "compiled" in inspect.signature(load_config).parameters else {}


def load_as_run(config_file: Path) -> tuple[LoadedConfig, Any]:
    """The project as ``sentinel run`` loads it in the code measured (``--src``): the config and
    the watcher chunks still to read (``load_streamed``, where the code has it; else None)."""
    from sentinel_hooks.config import loader

    streamed = getattr(loader, "load_streamed", None)
    if streamed is not None:
        return streamed(config_file)  # type: ignore[no-any-return]
    return load_config(config_file, **compiled()), None


async def warm_up(project: Project) -> None:
    """Start and stop a service with no watchers in a sibling folder, so imports and the
    one-off costs of a service are in the "before" reading, not in the per-watcher share."""
    empty = project.root.parent / f"{project.root.name}-empty"
    (empty / "watchers").mkdir(parents=True, exist_ok=True)
    (empty / "sentinel.yaml").write_text(project.config_file.read_text())
    service = Service(load_config(empty / "sentinel.yaml"))
    await service.start()
    await service.stop()


async def run(project: Project, n: int, max_s: float, *, warm: bool = True) -> int:
    """Warm up (unless ``warm`` is False: the million mode times the first poll from launch, as
    ``sentinel run`` makes it), load and start, announce, serve; 1 when the watchers did not all load."""
    pid = os.getpid()
    if warm:
        await warm_up(project)
    gc.collect()
    rss_before = rss_kib(pid)
    began = time.monotonic()
    gc.disable()  # as ``sentinel run`` loads and starts (cli/run.py); the start ends with a freeze
    try:
        config, chunks = load_as_run(project.config_file)
        config_s = time.monotonic() - began  # streamed: sentinel.yaml and the cache's index only
        service = Service(config, **({} if chunks is None else {"watcher_chunks": chunks}))
        await service.start()
    finally:
        gc.enable()
    try:
        if service.cluster is not None:  # Redis: runners start as their leases are acquired
            await service.cluster.keeper.drain()
        load_s = time.monotonic() - began
        if service.watcher_count() != n:
            sys.stderr.write(f"bench: expected {n} watchers to load, got {service.watcher_count()}\n")
            return 1
        scheduled = write_schedule(service, project.schedule_file)
        announce(
            {
                "pid": pid,
                "url": service.url,
                "rss_before_kib": rss_before,
                "rss_loaded_kib": rss_kib(pid),
                "config_s": config_s,
                "load_s": load_s,
                "scheduled": scheduled,
            }
        )
        reason = await until_told_to_stop(max_s)
        sys.stderr.write(f"bench: service stopping ({reason})\n")
    finally:
        await service.stop()
    return 0


def main() -> None:
    """Entry point of the measured service process."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--project", type=Path, required=True)
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--cpu", type=int, default=None, help="pin to this CPU")
    parser.add_argument("--max-s", type=float, default=600.0, help="exit after this long regardless")
    parser.add_argument("--no-warm-up", action="store_true", help="no empty service before the load")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    pin_to(args.cpu)
    sys.exit(asyncio.run(run(Project(args.project), args.n, args.max_s, warm=not args.no_warm_up)))


if __name__ == "__main__":
    main()
