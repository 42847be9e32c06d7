"""The composition root: the parts of one Sentinel process (store, safe HTTP, watchers, firing, API).

``Service`` builds every part in order, one builder per stage from the ground up (``__init__``
calls them: store and cluster, delivery and relay, callbacks, watchers, retention; the API when
it starts); ``start`` and ``stop`` spell out the order parts start and stop in, a line each;
``reload`` applies changed watcher files and skills (an invalid file is reported and the last
good version keeps running).
``sentinel run`` runs it as the process (``cli.run``: signals, SIGHUP reloads).
With a Redis store the service is one replica of a cluster: ``ClusterOwnership`` decides which
polled and subscribed watchers this replica runs (docs/scaling.md, "Watcher ownership"), and hook
sessions queue in a Redis Stream any replica can take them from ("Hook sessions").
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import itertools
import logging
import random
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentinel_hooks.callbacks.intake.intake import CallbackIntake, CallbackSink
from sentinel_hooks.callbacks.intake.silences import Silences
from sentinel_hooks.callbacks.mcp.client import McpServers
from sentinel_hooks.callbacks.sessions.hooks import HookSessions
from sentinel_hooks.canonical import sha256_hex
from sentinel_hooks.clock import Clock, SystemClock
from sentinel_hooks.config.linemap import LineMap
from sentinel_hooks.config.loaded import LoadedWatcher
from sentinel_hooks.config.loader import (
    LoadedConfig,
    load_config,
    ping_key_clashes,
    ping_key_issue,
    validate_watcher,
)
from sentinel_hooks.config.skills import Skill
from sentinel_hooks.config.watcher import AnyWatcher
from sentinel_hooks.core.roles import Who
from sentinel_hooks.delivery.dispatch import Dispatcher
from sentinel_hooks.delivery.targets.base import TargetContext, create_targets
from sentinel_hooks.delivery.targets.console import ConsoleTarget
from sentinel_hooks.errors import ConfigError, NotFound, SentinelError
from sentinel_hooks.events import Events
from sentinel_hooks.heap import freeze_heap, freeze_loaded
from sentinel_hooks.inbox.items import Inbox
from sentinel_hooks.inbox.severity import severity_for
from sentinel_hooks.metrics import Metrics
from sentinel_hooks.net.client import SafeHttp
from sentinel_hooks.operations import ServiceOperations
from sentinel_hooks.relay.escalation import Escalations
from sentinel_hooks.relay.notices import Notices
from sentinel_hooks.relay.relay import Relay
from sentinel_hooks.retention import Ages, Pruner, Pruning, history_keep, target_checkpoints
from sentinel_hooks.store import Store, open_store
from sentinel_hooks.store.health import WriteCheck
from sentinel_hooks.store.records import Delivery, InboxItem, Recorded
from sentinel_hooks.tracing import create_tracing
from sentinel_hooks.watchers.alerts import RESOLVED_NOTE, SOURCE_ACTOR, AlertStreams, InboxCloser
from sentinel_hooks.watchers.manager import API_DEFINITION_PREFIX, ReloadReport, WatcherManager, api_source
from sentinel_hooks.watchers.pipeline import FiringPipeline
from sentinel_hooks.watchers.schedule import LoopScheduler
from sentinel_hooks.watchers.shared import RunnerDeps
from sentinel_hooks.watchers.strategy import StrategyContext
from sentinel_hooks.watchers.writeback import WatcherWrites

if TYPE_CHECKING:  # imported where used: the first polls need neither Redis nor the API's server
    from aiohttp import web

    from sentinel_hooks.callbacks.queues.stream import StreamSettings
    from sentinel_hooks.cluster import ClusterOwnership

log = logging.getLogger(__name__)


RELOADER = Who("reload", via="source")  # a reload (SIGHUP) is the files' change, made by whoever edited them


class Service(ServiceOperations):
    """Everything one ``sentinel run`` process runs (what its API calls: ``ServiceOperations``)."""

    store: Store  # every role: the parts are each given the ones they call

    def __init__(
        self,
        config: LoadedConfig,
        *,
        clock: Clock | None = None,
        sink: CallbackSink | None = None,
        state_dir: Path | None = None,
        pruning: Pruning | None = None,
        watcher_chunks: Iterable[Sequence[LoadedWatcher]] | None = None,
    ) -> None:
        """Build every part in order, each given what it calls at construction: one builder per
        stage, from the ground up (the API is built when it starts, ``_start_api``).

        ``sink`` takes accepted callbacks instead of the hook sessions (benchmarks, tests);
        ``pruning`` replaces the ``retention`` settings' schedule (benchmarks). Three calls run
        against the build order (the outbox reports to the relay, the inbox to the hook sessions,
        a dead letter to the inbox): they go through this object's methods, which reach the
        part only when called, after construction. ``watcher_chunks`` (``sentinel run``, from
        ``config.loader.load_streamed``): the file-defined watchers, ``config`` having none,
        read and started a chunk at a time by ``start``.
        """
        self.config = config
        self._watcher_chunks = watcher_chunks
        self.state_dir = state_dir or default_state_dir(config)
        self.clock = clock or SystemClock()
        self.redactor = config.redactor
        self.metrics = Metrics()
        self._build_store_and_cluster()  # events, store, write check, safe HTTP, scheduler, cluster
        self._build_delivery_and_relay()  # targets, escalations, outbox, relay, notices, inbox
        self._build_callbacks(sink)  # MCP servers, hook sessions, silences, intake
        self._build_watchers()  # write-back, firing pipeline, alert streams, watcher manager
        self._build_retention(pruning)  # the pruner
        self.ready = False
        self._web: web.AppRunner | None = None
        server = config.service.server
        self.url = f"http://{_url_host(server.host)}:{server.port}"  # reachable from here
        self.bound: list[tuple[str, int]] = []  # the addresses the API listens on (host, port), once started

    def _build_store_and_cluster(self) -> None:
        """What every stage shares: telemetry, the store (and the check /readyz asks), safe
        outbound HTTP, the poll scheduler; and, when the store is shared by replicas, the
        ownership of watchers between them."""
        config, service = self.config, self.config.service
        events_file = service.telemetry.events_file
        self.events = Events(
            metrics=self.metrics,
            clock=self.clock,
            redactor=self.redactor,
            events_file=config.base_dir / events_file if events_file else None,
            tracing=create_tracing(service.telemetry.otlp_endpoint),
        )
        self.store = open_store(service.store, base_dir=config.base_dir)
        self.write_check = WriteCheck(self.store)  # what /readyz asks
        self.http = SafeHttp(
            allowed_hosts=service.allowed_hosts,
            allow_private_networks=service.allow_private_networks,
            max_response_bytes=service.limits.max_response_bytes,
            request_timeout_s=service.limits.request_timeout_ms / 1000,
        )
        self.scheduler = LoopScheduler(timezone=UTC)
        self.cluster: ClusterOwnership | None = None
        shared = self.store.shared
        if shared is not None:  # shared state: other replicas may run beside this one
            from sentinel_hooks.cluster import ClusterOwnership

            self.cluster = ClusterOwnership(shared, lease_ms=service.cluster.lease_ms, clock=self.clock)

    def _build_delivery_and_relay(self) -> None:
        """The targets and the outbox that sends to them, the relay that keeps each fire's
        contract, its notices, escalations and the operator's inbox."""
        config, service = self.config, self.config.service
        target_context = TargetContext(
            http=self.http,
            clock=self.clock,
            base_dir=config.base_dir,
            store=self.store,
            slack_buttons=service.slack.signing_secret is not None,
        )
        self.targets = create_targets(service.targets, target_context)
        if "console" not in self.targets:  # environment: test routes every delivery here
            self.targets["console"] = ConsoleTarget("console", target_context)
        self.escalations = Escalations(
            store=self.store,
            clock=self.clock,
            service=service,
            watcher=self._watcher_spec,
            redactor=self.redactor,
            metrics=self.metrics,
        )
        self.dispatcher = Dispatcher(
            store=self.store,
            clock=self.clock,
            targets=self.targets,
            spec=service.delivery,
            dead_letter=self._dead_letter,
            on_moved=self._moved,
            lease_ms=max(5_000, 2 * service.limits.request_timeout_ms),
            events=self.events,
            redactor=self.redactor,
            gate=self.escalations,
        )
        self.relay = Relay(store=self.store, clock=self.clock, dispatcher=self.dispatcher, events=self.events)
        self.notices = Notices(dispatcher=self.dispatcher, relay=self.relay, clock=self.clock)
        self.inbox = Inbox(
            self.store,
            self.clock,
            plan=self.escalations.first_step,
            notify=self._item_created,
            on_decision=self._approval_decided,
            redactor=self.redactor,
        )

    def _build_callbacks(self, sink: CallbackSink | None) -> None:
        """The MCP servers the sessions call, the hook sessions, silences, and the intake that
        takes each fire's callback (to ``sink`` when given, else to the hook sessions)."""
        config, service = self.config, self.config.service
        self.mcp = McpServers(
            service.mcp_servers,
            base_dir=config.base_dir,
            redactor=self.redactor,
            clock=self.clock,
            policy=self.http.policy,
        )
        stream = self._session_stream()
        self.sessions = HookSessions(
            store=self.store,
            clock=self.clock,
            service=service,
            relay=self.relay,
            inbox=self.inbox,
            redactor=self.redactor,
            work_dir=self.state_dir / "commands",
            skill=self._skill,
            watcher=self._watcher_spec,
            events=self.events,
            stream=stream,
            requeue=None if sink is None else sink.requeue,  # decided approvals go where callbacks go
            mcp=self.mcp,
            audit=self.audit,
        )
        if sink is None:  # a group's ended session runs again for joins after its page (SPEC §19)
            self.relay.rejoin = self.sessions.rejoin
        self.silences = Silences(self.store, self.clock, service.maintenance_windows)
        self.intake = CallbackIntake(
            store=self.store,
            clock=self.clock,
            service=service,
            sink=sink or self.sessions,
            on_accepted=self.notices,
            events=self.events,
            silences=self.silences,
            wait_in_queue=sink is None and stream is not None,  # groups wait in the Redis stream
        )

    def _session_stream(self) -> StreamSettings | None:
        """Where hook sessions queue when replicas share Redis (None: in this process)."""
        shared = self.store.shared
        if self.cluster is None or shared is None:
            return None
        from sentinel_hooks.callbacks.queues.stream import StreamSettings

        return StreamSettings(
            redis_url=shared.url,
            key_prefix=shared.key_prefix,
            replica_id=self.cluster.replica_id,
            lease_ms=self.config.service.cluster.lease_ms,
        )

    def _build_watchers(self) -> None:
        """The watchers' batched writes, the firing pipeline, the alert streams, and the manager
        of every watcher's runner (with what the runners share)."""
        config, service = self.config, self.config.service
        self.watcher_writes = WatcherWrites(self.store, keep=history_keep(service.retention))
        self.pipeline = FiringPipeline(
            store=self.store,
            clock=self.clock,
            service=service,
            intake=self.intake,
            base_dir=config.base_dir,
            redactor=self.redactor,
            on_resolved=self.notices.resolved,
            events=self.events,
            writes=self.watcher_writes,
        )
        self.alerts = AlertStreams(
            store=self.store,
            pipeline=self.pipeline,
            on_resolved=self.notices.resolved,
            resolve_items=InboxCloser(self.inbox, self.store, audited=self._resolved_at_source),
            events=self.events,
        )
        context = StrategyContext(
            http=self.http,
            clock=self.clock,
            limits=service.limits,
            base_dir=config.base_dir,
            redactor=self.redactor,
        )
        self.manager = WatcherManager(
            RunnerDeps(
                store=self.store,
                clock=self.clock,
                pipeline=self.pipeline,
                context=context,
                metrics=self.metrics,
                scheduler=self.scheduler,
                redactor=self.redactor,
                rng=random.Random(),
                writes=self.watcher_writes,
                alerts=self.alerts,
            ),
            ownership=self.cluster,
        )

    def _build_retention(self, pruning: Pruning | None) -> None:
        """The pruner, on the ``retention`` settings' schedule unless ``pruning`` is given."""
        service = self.config.service
        pruning = pruning or Pruning(Ages.from_spec(service.retention))
        self.pruner = Pruner(
            self.store,
            self.clock,
            pruning.ages,
            metrics=self.metrics,
            interval_s=pruning.interval_s,
            first_pass_s=pruning.first_pass_s,
            callback_checkpoints=target_checkpoints(service.targets),
        )

    async def start(self) -> None:
        """Open the store, start the watchers and the API; raise SentinelError with the reason."""
        await self.store.open()
        await self.store.ping()
        self.events.open()
        await self.http.start()
        self.dispatcher.start()
        self.relay.start()
        self.scheduler.start()
        definitions = await self.store.list_watcher_states(API_DEFINITION_PREFIX)
        freeze_loaded()  # the loaded project: later collections of the start walk only what it adds
        chunks, self._watcher_chunks = self._watcher_chunks, None
        if chunks is not None and self.cluster is None:  # started as they are read
            await self.manager.start_streamed(chunks, partial(self._all_read, definitions))
        else:
            if chunks is not None:  # leases are taken in the order of first polls: all are needed
                self._all_read(definitions, list(itertools.chain.from_iterable(chunks)))
            await self.manager.start(self.config.watchers, self._api_watchers(definitions))
        if self.cluster is not None:
            await self.cluster.start(
                self.manager.leases_acquired, self.manager.lease_lost, self.manager.changed_elsewhere
            )
            await self.manager.restore_idle_states()  # the first slices of leases start meanwhile
        self.mcp.start()  # in the background: a slow or broken MCP server delays nothing
        await self.sessions.start()
        self.pruner.start()
        await self._start_api()
        freeze_heap()
        self.ready = True

    async def _start_api(self) -> None:
        from aiohttp import web

        from sentinel_hooks.api.app import build_app

        server = self.config.service.server
        self._web = web.AppRunner(build_app(self), access_log=None, shutdown_timeout=2.0)
        await self._web.setup()
        site = web.TCPSite(self._web, server.host, server.port)
        try:
            await site.start()
        except OSError as exc:
            raise SentinelError(
                f"cannot listen on {server.host}:{server.port}: {exc.strerror or exc} "
                "(is another sentinel running? change server.port)"
            ) from exc
        addresses = self._web.addresses
        if addresses:
            self.bound = [(str(address[0]), int(address[1])) for address in addresses]
            self.url = f"http://{_url_host(server.host)}:{addresses[0][1]}"

    async def stop(self) -> None:
        """Stop taking requests and starting polls, let in-flight polls and writes finish, close
        everything."""
        self.ready = False
        self.scheduler.halt_polls()  # what stops next must not wait behind polls due meanwhile
        if self._web is not None:
            await self._web.cleanup()
        if self.cluster is not None:  # this replica's runners stop, then their leases are released
            await self.cluster.stop()
        await self.pruner.stop()
        await self.manager.stop()
        await self.watcher_writes.drain()
        await self.intake.close()  # groups waiting for their waitMs: resumed at the next start
        await self.sessions.stop()
        await self.mcp.stop()  # after the sessions: none is left calling a tool
        await self.relay.stop()
        await self.dispatcher.stop()
        for target in self.targets.values():
            with contextlib.suppress(Exception):
                await target.close()
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        await self.http.close()
        await self.store.close()
        self.events.close()
        if self.events.tracing is not None:  # the last spans, sent before the process ends
            await asyncio.to_thread(self.events.tracing.shutdown)
        gc.unfreeze()  # what start froze may be garbage now (several services in one process: tests)

    async def reload(self) -> ReloadReport | None:
        """Re-read the watcher files and skills; keep the last good version when any is invalid.

        Sessions that start after the reload get the new skill text (they look skills up in
        ``self.config``); a session already running keeps the text it started with.
        """
        try:  # parsing thousands of watchers takes seconds: off the loop, so polls go on meanwhile
            fresh = await asyncio.to_thread(load_config, self.config.path)
        except ConfigError as exc:
            for issue in exc.issues:
                log.error("reload refused: %s", issue)
            return None
        # a watcher file may take the pingKey of a heartbeat created through the API meanwhile
        clashes = ping_key_clashes([*self.manager.api_watchers(), *fresh.watchers])
        if clashes:
            for later, earlier in clashes:
                log.error("reload refused: %s", ping_key_issue(later, earlier))
            return None
        if fresh.service != self.config.service:
            log.warning(
                "sentinel.yaml changed: watcher changes are applied now, service settings after a restart"
            )
        report = await self.manager.apply(fresh.watchers)
        self.config = LoadedConfig(
            self.config.path,
            self.config.base_dir,
            self.config.service,
            fresh.watchers,
            fresh.skills,
            self.config.redactor.merged(fresh.redactor),
        )
        freeze_heap()
        log.info(
            "reloaded: %d added, %d changed, %d removed",
            len(report.added),
            len(report.changed),
            len(report.removed),
        )
        summary = f"{len(report.added)} added, {len(report.changed)} changed, {len(report.removed)} removed"
        await self.audit(RELOADER, "config.reload", self.config.path.name, summary)
        return report

    def _all_read(
        self, states: Mapping[str, dict[str, Any]], watchers: Sequence[LoadedWatcher]
    ) -> list[LoadedWatcher]:
        """The file-defined ``watchers``, streamed in at the start, are all read: they are the
        config's from now on; the API-created watchers to start after them (``_api_watchers``)."""
        self.config = dataclasses.replace(self.config, watchers=tuple(watchers))
        return self._api_watchers(states)

    def _api_watchers(self, states: Mapping[str, dict[str, Any]]) -> list[LoadedWatcher]:
        """Watchers created through the API in an earlier run (kept in the store's ``states``)."""
        found: list[LoadedWatcher] = []
        file_ids = {w.spec.id for w in self.config.watchers}
        for key, state in states.items():
            if not key.startswith(API_DEFINITION_PREFIX):
                continue
            data = state.get("definition")
            if not isinstance(data, dict):
                continue
            spec, issues = validate_watcher(
                data,
                display=key,
                lines=LineMap(),
                service=self.config.service,
                skills=self.config.skills,
                base_dir=self.config.base_dir,
            )
            if spec is None or spec.id in file_ids:
                log.error(
                    "API-created watcher %s skipped: %s",
                    key,
                    "; ".join(map(str, issues)) or "id now in a file",
                )
                continue
            found.append(LoadedWatcher.of(spec, data, api_source(spec.id)))
        # a watcher file may have taken the pingKey of a heartbeat created through the API
        clashes = ping_key_clashes([*self.config.watchers, *found])
        for later, earlier in clashes:
            log.error("API-created watcher %s skipped: %s", later.spec.id, ping_key_issue(earlier, later))
        skipped = {id(later) for later, _ in clashes}
        return [loaded for loaded in found if id(loaded) not in skipped]

    def _watcher_spec(self, watcher_id: str) -> AnyWatcher | None:
        """The running definition of a watcher (None when it is gone)."""
        try:
            return self.manager.get(watcher_id).spec
        except NotFound:
            return None

    def _skill(self, skill_id: str) -> Skill | None:
        """The skill as last loaded (at start or by a reload), for sessions starting now."""
        return self.config.skills.get(skill_id)

    def _moved(self, recorded: Recorded) -> None:
        """The outbox moved contracts: their owner, the relay, hears of it."""
        self.relay.moved(recorded)

    async def _item_created(self, item: InboxItem) -> None:
        """A new inbox item was stored with its first escalation step: the outbox looks now."""
        self.dispatcher.wake()

    async def _resolved_at_source(self, item: InboxItem) -> None:
        """An alert source resolved the item (SPEC §16): the audit trail says so, via ``source``."""
        await self.audit(Who(SOURCE_ACTOR, via="source"), "inbox.resolve", item.id, RESOLVED_NOTE)

    async def _approval_decided(self, item: InboxItem) -> None:
        """An approval was decided: the hook sessions resume its paused session."""
        await self.sessions.approvals.decided(item)

    async def _dead_letter(self, delivery: Delivery, error: str) -> None:
        """A delivery that failed for good becomes a delivery_failure inbox item holding the message
        (of the message's callback: an escalation step's delivery is keyed by its item)."""
        await self.inbox.create(
            "delivery_failure",
            severity=severity_for(delivery.message.get("priority")),
            reason=f"delivery to {delivery.target} failed after {delivery.attempts + 1} attempt(s): {error}",
            watcher_id=delivery.message.get("watcher_id") or None,
            callback_id=delivery.message.get("callback_id") or delivery.callback_id,
            detail={"delivery": delivery.model_dump(mode="json", by_alias=True), "error": error},
            item_id="DF" + sha256_hex(delivery.key)[:24].upper(),
        )


def default_state_dir(config: LoadedConfig) -> Path:
    """Where approved commands run: beside the SQLite file, else ``.sentinel`` in the project."""
    store = config.service.store
    if store.startswith("sqlite:///"):
        rest = store[len("sqlite:///") :]
        path = Path(rest) if rest.startswith("/") else config.base_dir / rest
        return path.parent
    return config.base_dir / ".sentinel"


WILDCARDS = {"0.0.0.0": "every IPv4 interface", "::": "every interface", "": "every interface"}


def _url_host(host: str) -> str:
    return "127.0.0.1" if host in WILDCARDS else _bracketed(host)


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def listening(bound: list[tuple[str, int]], url: str) -> str:
    """Where the API listens, as the start-up line says it: the addresses actually bound (``url``
    before the API started), and for a wildcard (0.0.0.0 in a container) what it means and the
    URL that reaches it from this machine."""
    if not bound:
        return url
    shown = ", ".join(f"{_bracketed(host)}:{port}" for host, port in bound)
    wildcard = next((WILDCARDS[host] for host, _ in bound if host in WILDCARDS), None)
    if wildcard is not None:
        return f"{shown} ({wildcard}; from this machine {url})"
    return f"http://{shown}" if len(bound) == 1 else shown
