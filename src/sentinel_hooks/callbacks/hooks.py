"""The hook-session part of a service: model backends, the command gate, sessions and approvals.

``HookSessions`` is the CallbackSink the intake hands accepted callbacks to. Its queue is the
in-process ``SessionQueue``, or, when replicas share a Redis store (``stream`` settings given),
the ``StreamSessionQueue`` that lets any replica run any session (docs/scaling.md).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from pathlib import Path

from sentinel_hooks.callbacks.approvals import ApprovalResumer, CommandGate
from sentinel_hooks.callbacks.backends import create_backend
from sentinel_hooks.callbacks.backends.base import ModelBackend
from sentinel_hooks.callbacks.envelope import Envelope
from sentinel_hooks.callbacks.session import SessionDeps, SessionQueue, SessionRunner
from sentinel_hooks.clock import Clock
from sentinel_hooks.cluster.session_stream import StreamSessionQueue, StreamSettings
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.config.watcher import AnyWatcher
from sentinel_hooks.events import Events
from sentinel_hooks.inbox.items import Inbox
from sentinel_hooks.relay.relay import Relay
from sentinel_hooks.skills.loader import Skill
from sentinel_hooks.store.base import Store
from sentinel_hooks.store.records import Contract

log = logging.getLogger(__name__)


class HookSessions:
    """Runs a hook session for every accepted callback."""

    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        service: ServiceConfig,
        relay: Relay,
        inbox: Inbox,
        redactor: Redactor,
        work_dir: Path,
        skill: Callable[[str], Skill | None],
        watcher: Callable[[str], AnyWatcher | None],
        events: Events | None = None,
        stream: StreamSettings | None = None,
    ) -> None:
        self.backends: dict[str, ModelBackend] = {
            name: create_backend(name, spec) for name, spec in service.models.items()
        }
        self.gate = CommandGate(
            policy=service.action_policy, inbox=inbox, work_dir=work_dir, secrets=redactor.secrets
        )
        self.runner = SessionRunner(
            SessionDeps(
                store=store,
                clock=clock,
                service=service,
                relay=relay,
                inbox=inbox,
                gate=self.gate,
                backends=self.backends,
                watcher=watcher,
                skill=skill,
                redactor=redactor,
                events=events,
            )
        )
        self.queue: SessionQueue | StreamSessionQueue
        if stream is None:
            self.queue = SessionQueue(
                self.runner, store=store, concurrency=service.hook_concurrency, events=events
            )
        else:
            self.queue = StreamSessionQueue(
                self.runner,
                store=store,
                clock=clock,
                settings=stream,
                concurrency=service.hook_concurrency,
                events=events,
            )
        self.approvals = ApprovalResumer(
            store=store,
            clock=clock,
            inbox=inbox,
            gate=self.gate,
            relay=relay,
            requeue=self.queue.requeue,
            append=self.runner.append,
            timeout_ms=service.action_policy.approval_timeout_ms,
        )
        inbox.on_decision = self.approvals.decided

    async def submit(self, envelope: Envelope, contract: Contract) -> None:
        await self.queue.submit(envelope, contract)

    async def requeue(self, contract: Contract) -> None:
        await self.queue.requeue(contract)

    async def start(self) -> None:
        resumed = await self.queue.resume()
        if resumed:
            log.info("resuming %d hook session(s) interrupted by a restart", resumed)
        self.approvals.start()

    async def stop(self) -> None:
        await self.approvals.stop()
        await self.queue.stop()
        for backend in self.backends.values():
            with contextlib.suppress(Exception):
                await backend.close()
