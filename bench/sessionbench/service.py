"""The measured process: a whole Sentinel ``Service`` with real hook sessions, fired at a steady rate.

Run as ``python -m sessionbench.service -c sentinel.yaml --rate R --duration-s D --watchers W
--map FILE [--no-sessions] [--profile FILE]``. It builds the service as ``sentinel run`` does
(``load_config``, the same logging, ``Service.start``), prints ``READY``, and on the ``go``
command accepts ``R * D`` callbacks through ``service.intake.accept``, one every 1/R seconds
(at most ``IN_FLIGHT`` accepts at once), each naming one of ``W`` watcher ids in turn (so ``W``
session keys: a key's callbacks run one at a time, different keys in parallel up to
``hookConcurrency``). The watchers are not configured, so each session uses
``defaultHookModel``: the bench's model server.

``--no-sessions`` is the floor: the relay benchmark's ``SilentSessions`` takes the callbacks
instead of the hook sessions, so every fire costs intake, relay and the fallback's delivery and
nothing else. ``--profile`` runs cProfile from ``go`` until stdin closes and writes its stats.

When the last callback is accepted it writes ``FILE`` (JSON lines ``{callbackId, firedAt}``,
epoch seconds) and prints ``INSERTED``; it runs until stdin closes, then stops gracefully.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import sys
import time
from pathlib import Path
from typing import Any

from relaybench.service import Commands, SilentSessions

from sentinel_hooks.clock import iso
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.core.envelope import Envelope, EnvelopeDelivery, EnvelopeTrigger, EnvelopeWatcher
from sentinel_hooks.logs import configure_logging
from sentinel_hooks.service import Service

IN_FLIGHT = 64


def _say(tag: str, data: dict[str, Any]) -> None:
    sys.stdout.write(f"{tag} {json.dumps(data)}\n")
    sys.stdout.flush()


def envelope_for(service: Service, index: int, run_id: str, watchers: int) -> Envelope:
    """Fire ``index``: watcher ``index % watchers``, a unique dedupe key, the configured targets."""
    config = service.config.service
    return Envelope(
        watcher=EnvelopeWatcher(id=f"session-bench-{index % watchers}", event_name="session_bench"),
        trigger=EnvelopeTrigger(
            kind="match", matched_at=iso(service.clock.now()), dedupe_key=f"session-bench:{run_id}:{index}"
        ),
        payload={"run": run_id, "i": index, "value": 42.5, "host": f"node-{index % 17}"},
        delivery=EnvelopeDelivery(
            targets=list(config.targets),
            timeout_ms=config.hook_response_timeout_ms,
            fallback_mode=config.hook_response_fallback_mode,
        ),
    )


async def fire(service: Service, *, rate: float, duration_s: float, watchers: int) -> dict[str, Any]:
    """Accept ``rate * duration_s`` callbacks on schedule; the map lines, lags and errors."""
    n = max(1, round(rate * duration_s))
    run_id = f"{time.time():.0f}"
    lines: list[str] = []
    lags: list[float] = []
    errors: list[str] = []
    limit = asyncio.Semaphore(IN_FLIGHT)
    loop = asyncio.get_running_loop()

    async def accept(index: int) -> None:
        try:
            fired_at = time.time()
            contract = await service.intake.accept(envelope_for(service, index, run_id, watchers))
            lines.append(json.dumps({"callbackId": contract.callback_id, "firedAt": fired_at}))
        except Exception as exc:  # counted and reported: a refused fire has no outcome to wait for
            errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            limit.release()

    tasks: list[asyncio.Task[None]] = []
    start = loop.time()
    for index in range(n):
        due = start + index / rate
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        await limit.acquire()
        lags.append(loop.time() - due)
        tasks.append(loop.create_task(accept(index)))
    await asyncio.gather(*tasks)
    lags.sort()
    return {
        "lines": lines,
        "fires": len(lines),
        "lagP99Ms": 1000 * lags[int(0.99 * (len(lags) - 1))] if lags else 0.0,
        "errors": len(errors),
        "firstError": errors[0] if errors else None,
    }


async def run(args: argparse.Namespace) -> None:
    config = load_config(args.config)
    configure_logging(config.redactor)
    service = Service(config, sink=SilentSessions() if args.no_sessions else None)
    commands = Commands()
    await commands.open()
    profile: cProfile.Profile | None = None
    try:
        await service.start()
        _say("READY", {"url": service.url, "store": type(service.store).__name__})
        if await commands.next() != "go":
            return
        if args.profile is not None:
            profile = cProfile.Profile()
            profile.enable()
        started = time.time()
        done = await fire(service, rate=args.rate, duration_s=args.duration_s, watchers=args.watchers)
        text = "".join(line + "\n" for line in done.pop("lines"))
        await asyncio.to_thread(args.map.write_text, text, encoding="utf-8")
        _say("INSERTED", {**done, "seconds": time.time() - started, "at": time.time()})
        while await commands.next() is not None:
            pass
    finally:
        if profile is not None:
            profile.disable()
            profile.dump_stats(str(args.profile))
        with contextlib.suppress(Exception):
            await asyncio.wait_for(service.stop(), timeout=10.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-c", "--config", type=Path, required=True)
    parser.add_argument("--rate", type=float, required=True, help="fires per second")
    parser.add_argument("--duration-s", type=float, required=True, help="how long to fire")
    parser.add_argument("--watchers", type=int, required=True, help="distinct watcher ids (session keys)")
    parser.add_argument("--map", type=Path, required=True, help="where to write callbackId → firedAt")
    parser.add_argument("--no-sessions", action="store_true", help="no hook sessions (the floor)")
    parser.add_argument("--profile", type=Path, default=None, help="write cProfile stats here")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
