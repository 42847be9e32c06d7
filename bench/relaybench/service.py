"""The measured process: a whole Sentinel ``Service`` that creates the benchmark's contracts itself.

Run as ``python -m relaybench.service -c sentinel.yaml --n N --spread-s S --map FILE
[--lead-s L]``. It builds the service as ``sentinel run`` does (``load_config``, the same
logging, ``Service.start``), with one change: a ``SilentSessions`` sink replaces the
hook-session queue (``Service(config, sink=…)``), so no agent ever answers and every
contract needs its fallback. It prints ``READY`` and, on the ``go`` command, accepts N
callbacks through ``service.intake.accept``:

* steady (no ``--lead-s``): one every S/N seconds, each with the configured
  ``hookResponseTimeoutMs``, so the deadlines spread uniformly over S seconds, one timeout
  after ``go``, while the intake is still running;
* preloaded: all at once, callback i with the timeout that puts its deadline at
  ``L + i * S / N`` seconds after ``go``, so the relay meets them with no intake beside it.

The intake is called in-process because this service's HTTP fire path does not take 1,000
fires/s on two cores (see RESULTS.md); dedupe, the stored contract and the relay wake-up
are the same either way. When the last callback is accepted it writes ``FILE`` (JSON lines
``{callbackId, deadline}``, deadline in epoch seconds) and prints ``INSERTED`` (count,
insertion lag, errors); then it runs until stdin closes (or SIGTERM/SIGINT), writes
``SETTLED`` (JSON lines ``{callbackId, settledAt}`` of every contract settled with a fallback,
read back from the store: when the relay handed it to the outbox) and stops the service
gracefully.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentinel_hooks.clock import iso
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.core.envelope import Envelope, EnvelopeDelivery, EnvelopeTrigger, EnvelopeWatcher
from sentinel_hooks.logs import configure_logging
from sentinel_hooks.service import Service
from sentinel_hooks.store.records import Contract

WATCHERS = 8  # callbacks name one of a few watcher ids (so, a few session keys), like real fires
IN_FLIGHT = 64  # accepts running at once, at most (like a busy API); the schedule sets the rate


class SilentSessions:
    """A hook-session queue whose agent never answers: the callback is dropped, the contract waits."""

    async def submit(self, envelope: Envelope, contract: Contract) -> None:
        """Take the callback and do nothing with it."""

    async def requeue(self, contract: Contract) -> None:
        """No session ever pauses for an approval here."""


def _say(tag: str, data: dict[str, Any]) -> None:
    sys.stdout.write(f"{tag} {json.dumps(data)}\n")
    sys.stdout.flush()


class Commands:
    """Lines from the parent on stdin; EOF (or a signal) means stop."""

    def __init__(self) -> None:
        self.reader = asyncio.StreamReader()
        self.stop = asyncio.Event()

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(self.reader), sys.stdin)
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.stop.set)

    async def next(self) -> str | None:
        """The next command, or None once stdin closed or a stop signal came."""
        line_task = asyncio.ensure_future(self.reader.readline())
        stop_task = asyncio.ensure_future(self.stop.wait())
        done, _ = await asyncio.wait({line_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
        for task in (line_task, stop_task):
            if task not in done:
                task.cancel()
        if line_task in done and line_task.result():
            return line_task.result().decode().strip()
        return None


def envelope_for(service: Service, index: int, run_id: str, target: str, timeout_ms: int) -> Envelope:
    """Callback ``index`` of the run: a unique dedupe key, one target, this timeout."""
    return Envelope(
        watcher=EnvelopeWatcher(id=f"relay-bench-{index % WATCHERS}", event_name="relay_bench"),
        trigger=EnvelopeTrigger(
            kind="match", matched_at=iso(service.clock.now()), dedupe_key=f"relay-bench:{run_id}:{index}"
        ),
        payload={"run": run_id, "i": index},
        delivery=EnvelopeDelivery(
            targets=[target],
            timeout_ms=timeout_ms,
            fallback_mode=service.config.service.hook_response_fallback_mode,
        ),
    )


@dataclass
class Insertion:
    """What ``insert`` did: the map's JSON lines, how late each accept started, what failed."""

    lines: list[str] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


async def insert(
    service: Service, *, n: int, spread_s: float, target: str, lead_s: float | None = None
) -> Insertion:
    """Accept ``n`` callbacks, steady (``lead_s`` None) or preloaded (see the module docstring)."""
    config = service.config.service
    run_id = f"{time.time():.0f}"
    done = Insertion()
    limit = asyncio.Semaphore(IN_FLIGHT)
    loop = asyncio.get_running_loop()
    wall_start = time.time()

    def timeout_ms(index: int) -> int:
        if lead_s is None:
            return config.hook_response_timeout_ms
        deadline = wall_start + lead_s + index * spread_s / n
        return max(1, round(1000 * (deadline - time.time())))

    async def accept(index: int) -> None:
        try:
            envelope = envelope_for(service, index, run_id, target, timeout_ms(index))
            contract = await service.intake.accept(envelope)
            if contract.state == "pending":
                deadline = contract.deadline.timestamp()
                done.lines.append(json.dumps({"callbackId": contract.callback_id, "deadline": deadline}))
        except Exception as exc:  # counted and reported: a refused callback has no contract to measure
            done.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            limit.release()

    # the accepts under way only: a gather of all n at the end (300,000 in a five-minute run) made
    # a done-callback per task in one turn of the loop, a second of the measured process's CPU
    # while the last deadlines fell due (the run's last tenth was the latest because of it)
    running: set[asyncio.Task[None]] = set()
    start = loop.time()
    for index in range(n):
        due = start if lead_s is not None else start + index * spread_s / n
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        await limit.acquire()
        if lead_s is None:  # preloaded callbacks have no schedule to lag behind
            done.lags.append(loop.time() - due)
        task = loop.create_task(accept(index))
        running.add(task)
        task.add_done_callback(running.discard)
    if running:
        await asyncio.wait(running)
    return done


async def write_settled(service: Service, path: Path) -> None:
    """``{callbackId, settledAt}`` (epoch seconds) of each contract settled with a fallback."""
    lines: list[str] = []
    cursor: str | None = None
    while True:
        page = await service.store.list_contracts(state="fallback_sent", limit=1000, cursor=cursor)
        for contract in page.items:
            if contract.settled_at is not None:
                settled = {"callbackId": contract.callback_id, "settledAt": contract.settled_at.timestamp()}
                lines.append(json.dumps(settled))
        cursor = page.next_cursor
        if cursor is None:
            break
    await asyncio.to_thread(path.write_text, "".join(line + "\n" for line in lines), encoding="utf-8")


async def run(
    config_path: Path,
    n: int,
    spread_s: float,
    map_path: Path,
    target: str,
    lead_s: float | None,
    settled_path: Path | None = None,
) -> None:
    """Start the service, insert on ``go``, stop on EOF."""
    config = load_config(config_path)
    configure_logging(config.redactor)
    service = Service(config, sink=SilentSessions())
    commands = Commands()
    await commands.open()
    try:
        await service.start()
        _say("READY", {"url": service.url, "store": type(service.store).__name__})
        if await commands.next() != "go":
            return
        started = time.time()
        done = await insert(service, n=n, spread_s=spread_s, target=target, lead_s=lead_s)
        text = "".join(line + "\n" for line in done.lines)
        await asyncio.to_thread(map_path.write_text, text, encoding="utf-8")
        lags = sorted(done.lags)
        _say(
            "INSERTED",
            {
                "contracts": len(done.lines),
                "lagP99Ms": 1000 * lags[int(0.99 * (len(lags) - 1))] if lags else 0.0,
                "lagMaxMs": 1000 * lags[-1] if lags else 0.0,
                "errors": len(done.errors),
                "firstError": done.errors[0] if done.errors else None,
                "seconds": time.time() - started,
                "at": time.time(),
            },
        )
        while await commands.next() is not None:
            pass
        if settled_path is not None:
            await write_settled(service, settled_path)
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(service.stop(), timeout=10.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-c", "--config", type=Path, required=True)
    parser.add_argument("--n", type=int, required=True, help="contracts to create")
    parser.add_argument("--spread-s", type=float, required=True, help="spread of their deadlines, seconds")
    parser.add_argument("--map", type=Path, required=True, help="where to write callbackId → deadline")
    parser.add_argument("--target", default="sink", help="the target name in sentinel.yaml")
    parser.add_argument(
        "--lead-s", type=float, default=None, help="preload: first deadline this long after go (else steady)"
    )
    parser.add_argument("--settled", type=Path, default=None, help="where to write callbackId → settledAt")
    args = parser.parse_args()
    asyncio.run(run(args.config, args.n, args.spread_s, args.map, args.target, args.lead_s, args.settled))


if __name__ == "__main__":
    main()
