"""Cluster fixtures: a real Redis (db 11, emptied before every test) and replicas on it; and a
cluster-mode WatcherManager over a store in memory (memory://) with a fake ownership (no Redis needed).

Redis is a real server the tests start themselves (``redis_server`` in tests/conftest.py): tests
that need it are skipped locally without the redis-server binary and fail when ``CI`` is set.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
import redis.asyncio

from sentinel_hooks.clock import Clock, SystemClock
from sentinel_hooks.cluster import LeaseKeeper, Leases, Membership
from sentinel_hooks.cluster.rendezvous import owned_by
from sentinel_hooks.config.loader import LoadedConfig, load_config
from sentinel_hooks.errors import StoreUnavailable
from sentinel_hooks.metrics import Metrics
from sentinel_hooks.service import Service
from sentinel_hooks.store import Store
from sentinel_hooks.store.shortcuts import put_watcher_state
from sentinel_hooks.watchers.manager import WatcherManager
from sentinel_hooks.watchers.shared import RunnerDeps
from sentinel_hooks.watchers.strategy import StrategyContext
from tests.support import Endpoint

PREFIX = "sentinel:"
LEASE_MS = 1000
# Whole services in one test process share its event loop with their endpoints; on a loaded 2-core
# machine that loop stalls for longer than a third of a 1 s lease, heartbeats and renewals time out
# and ownership flaps. Service-level tests use this lease (the chaos test's), and derive their
# deadlines from it.
SERVICE_LEASE_MS = 3000


def settle_within_s(lease_ms: int) -> float:
    """How long ownership may take to settle after replicas start or join.

    The design needs about one lease: a tick (lease / 3) for the others to see the newcomer, the
    hand-off (the runner stops, the lease is released), a tick for the newcomer to acquire. Four
    leases leave room for a loaded machine.
    """
    return 4 * lease_ms / 1000


def running(service: Service) -> set[str]:
    """The watchers whose runner runs in ``service``."""
    return {r.id for r in service.manager.runners() if r.running}


def settled(services: Sequence[Service], watcher_ids: Collection[str]) -> bool:
    """Each service runs exactly its rendezvous share of ``watcher_ids`` among these services
    (so together they run every watcher, each once)."""
    live = sorted(s.cluster.replica_id for s in services if s.cluster is not None)
    return all(
        s.cluster is not None and running(s) == owned_by(s.cluster.replica_id, watcher_ids, live)
        for s in services
    )


async def stop_all(services: Sequence[Service]) -> None:
    """Stop every service, even when stopping one of them fails (then raise the first error), so
    that a failed test leaves no sockets open to warn about in a later one."""
    errors: list[BaseException] = []
    for service in services:
        try:
            await service.stop()
        except Exception as exc:  # stop the others first; the test fails on the first error
            errors.append(exc)
    if errors:
        raise errors[0]


@pytest.fixture
def redis_db() -> int:
    """The cluster suite's own database of the tests' redis-server (``redis_url``, tests/conftest.py):
    replicas it killed or stopped never write into another suite's keys."""
    return 11


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[redis.asyncio.Redis]:
    """A plain client on the test database, to look at (and tamper with) keys."""
    client = redis.asyncio.Redis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


@dataclass
class Replica:
    """One replica's cluster parts, with callbacks that record what it was told to run."""

    membership: Membership
    leases: Leases
    keeper: LeaseKeeper
    running: set[str] = field(default_factory=set)
    acquired: list[tuple[str, int]] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.membership.replica_id

    async def start(self, watcher_ids: Sequence[str] = ()) -> None:
        """Track ``watcher_ids``, open, join and run the first tick."""
        for watcher_id in watcher_ids:
            self.keeper.track(watcher_id)
        await self.leases.open()
        await self.membership.start()
        await self.keeper.start()

    async def halt(self) -> None:
        """Freeze: no more heartbeats or renewals, nothing released (what a crash looks like)."""
        await self.keeper.halt()
        await self.membership.halt()

    async def close(self) -> None:
        await self.keeper.halt()
        await self.membership.close()
        await self.leases.close()


MakeReplica = Callable[..., Replica]


@pytest.fixture
async def make_replica(redis_url: str) -> AsyncIterator[MakeReplica]:
    """``make_replica(name, clock=…, before_lost=…, before_acquired=…)`` → a Replica (closed after
    the test).

    ``before_lost(watcher_id)`` is awaited inside ``on_lost`` before the watcher counts as stopped;
    ``before_acquired(tokens)`` inside ``on_acquired`` before they count as running (it may raise).
    """
    made: list[Replica] = []

    def make(
        name: str = "r",
        *,
        clock: Clock | None = None,
        lease_ms: int = LEASE_MS,
        before_lost: Callable[[str], Awaitable[None]] | None = None,
        before_acquired: Callable[[Mapping[str, int]], Awaitable[None]] | None = None,
    ) -> Replica:
        used = clock or SystemClock()
        membership = Membership(
            redis_url, key_prefix=PREFIX, lease_ms=lease_ms, clock=used, replica_id=f"{name}-{len(made)}"
        )
        leases = Leases(redis_url, key_prefix=PREFIX, replica_id=membership.replica_id, lease_ms=lease_ms)
        replica: Replica

        async def on_acquired(tokens: Mapping[str, int]) -> None:
            if before_acquired is not None:
                await before_acquired(tokens)
            for watcher_id, token in tokens.items():
                replica.running.add(watcher_id)
                replica.acquired.append((watcher_id, token))

        async def on_lost(watcher_id: str) -> None:
            if before_lost is not None:
                await before_lost(watcher_id)
            replica.running.discard(watcher_id)
            replica.lost.append(watcher_id)

        keeper = LeaseKeeper(leases, membership, clock=used, on_acquired=on_acquired, on_lost=on_lost)
        replica = Replica(membership, leases, keeper)
        made.append(replica)
        return replica

    yield make
    for replica in made:
        await replica.close()


def watcher_ids(count: int, prefix: str = "w") -> list[str]:
    """``count`` watcher ids: w000, w001, …"""
    return [f"{prefix}{i:03d}" for i in range(count)]


# -- a WatcherManager in cluster mode, over a store in memory, with a fake ownership -------------

MANAGER_CONFIG = """\
store: memory://
allowedHosts: ["127.0.0.1"]
limits: {minIntervalMs: 100, requestTimeoutMs: 2000}
targets: {console: {type: console}}
"""


def poll_watcher(watcher_id: str, url: str, *, interval_ms: int = 100) -> str:
    """An http-poll watcher of ``url`` whose conditions never hold (it polls, never fires)."""
    return f"""\
id: {watcher_id}
strategy: http-poll
endpoint: "{url}"
intervalMs: {interval_ms}
timeoutMs: 1000
retry: {{maxRetries: 0, baseMs: 50, maxMs: 100}}
conditions: [{{path: status, op: eq, value: never}}]
deliveryTargets: [console]
"""


SSE_WATCHER = """\
id: stream
strategy: sse
endpoint: "{url}"
retry: {{maxRetries: 0, baseMs: 50, maxMs: 100}}
conditions: [{{path: level, op: eq, value: crit}}]
deliveryTargets: [console]
"""

WEBHOOK_WATCHER = """\
id: hook
strategy: webhook
conditions: [{path: level, op: eq, value: crit}]
deliveryTargets: [console]
"""


class FakeOwnership:
    """An in-memory ``Ownership``: the test decides which leases (watcher → token) are held."""

    def __init__(self) -> None:
        self.held: dict[str, int] = {}
        self.tracked: set[str] = set()
        self.untracked: list[str] = []
        self.announced: list[tuple[str, dict[str, object]]] = []
        self.unsure = False  # True: ``holds`` cannot tell (as when Redis is unreachable)

    def track(self, watcher_id: str) -> int | None:
        self.tracked.add(watcher_id)
        return self.held.get(watcher_id)

    async def untrack(self, watcher_id: str) -> None:
        self.tracked.discard(watcher_id)
        self.untracked.append(watcher_id)

    async def holds(self, watcher_id: str, token: int) -> bool:
        if self.unsure:
            raise StoreUnavailable("cluster redis: check a lease got no answer within 0.5 s")
        return self.held.get(watcher_id) == token

    async def announce(self, watcher_id: str, change: dict[str, object]) -> None:
        self.announced.append((watcher_id, change))


@dataclass
class ManagerHarness:
    """A started cluster-mode WatcherManager (or a plain one) and what it runs on."""

    manager: WatcherManager
    ownership: FakeOwnership
    store: Store
    endpoint: Endpoint
    config: LoadedConfig
    metrics: Metrics


@pytest.fixture
async def endpoint() -> AsyncIterator[Endpoint]:
    """A local HTTP endpoint answering {"status": "ok"} and counting requests."""
    server = Endpoint()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def harness(
    tmp_path: Path, endpoint: Endpoint
) -> AsyncIterator[Callable[..., Awaitable[ManagerHarness]]]:
    """``await harness(cluster=True, sse=False)`` → a started manager over poll-1, poll-2, a webhook
    watcher ``hook`` and, with ``sse``, a subscribed watcher ``stream``; ``stored``: states in the
    store before it starts."""
    opened: list[tuple[Service, WatcherManager]] = []

    async def build(
        *,
        cluster: bool = True,
        held: dict[str, int] | None = None,
        sse: bool = False,
        stored: dict[str, dict[str, object]] | None = None,
    ) -> ManagerHarness:
        (tmp_path / "sentinel.yaml").write_text(MANAGER_CONFIG)
        folder = tmp_path / "watchers"
        folder.mkdir(exist_ok=True)
        for name in ("poll-1", "poll-2"):
            (folder / f"{name}.yaml").write_text(poll_watcher(name, endpoint.url(f"/{name}")))
        (folder / "hook.yaml").write_text(WEBHOOK_WATCHER)
        if sse:
            (folder / "stream.yaml").write_text(SSE_WATCHER.format(url=endpoint.url("/events")))
        config = load_config(tmp_path / "sentinel.yaml", environ={})
        service = Service(config)  # used for its parts only: never started
        await service.store.open()
        for watcher_id, state in (stored or {}).items():  # what an earlier run left
            await put_watcher_state(service.store, watcher_id, state)
        await service.http.start()
        service.scheduler.start()
        deps = RunnerDeps(
            store=service.store,
            clock=service.clock,
            pipeline=service.pipeline,
            context=StrategyContext(
                http=service.http,
                clock=service.clock,
                limits=config.service.limits,
                base_dir=config.base_dir,
                redactor=config.redactor,
            ),
            metrics=service.metrics,
            scheduler=service.scheduler,
            redactor=config.redactor,
            rng=random.Random(7),
        )
        ownership = FakeOwnership()
        ownership.held.update(held or {})
        manager = WatcherManager(deps, ownership=ownership if cluster else None)
        opened.append((service, manager))  # before starting: a failed start is cleaned up too
        await manager.start(config.watchers)
        return ManagerHarness(manager, ownership, service.store, endpoint, config, service.metrics)

    yield build
    for service, manager in opened:
        try:
            await manager.stop()
        finally:
            service.scheduler.shutdown(wait=False)
            await service.http.close()
            await service.store.close()
