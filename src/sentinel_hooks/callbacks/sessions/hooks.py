"""The hook-session part of a service: model backends, the command gate, sessions and approvals.

``HookSessions`` is the CallbackSink the intake hands accepted callbacks to. Its queue is the
in-process ``local`` one, or, when replicas share a Redis store (``stream`` settings given),
the ``redis-stream`` one that lets any replica run any session (docs/scaling.md); both keep the
``SessionQueue`` contract (``callbacks/queues/base.py``).

Approval decisions reach it through ``approvals.decided``: the inbox's ``on_decision`` hook,
which the composition root gives the inbox.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from sentinel_hooks.callbacks.backends import create_backend
from sentinel_hooks.callbacks.backends.base import ModelBackend
from sentinel_hooks.callbacks.mcp.calls import McpGate
from sentinel_hooks.callbacks.mcp.client import McpServers
from sentinel_hooks.callbacks.policy.approvals import ApprovalResumer, Audit, CommandGate, no_audit
from sentinel_hooks.callbacks.policy.judge import Judges
from sentinel_hooks.callbacks.queues.base import QueueContext, SessionQueue, create_session_queue
from sentinel_hooks.callbacks.sessions.progress import REJOINED, progress_key
from sentinel_hooks.callbacks.sessions.session import SessionDeps, SessionRunner
from sentinel_hooks.clock import Clock
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.config.watcher import AnyWatcher
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.events import Events
from sentinel_hooks.inbox.items import Inbox
from sentinel_hooks.relay.relay import Relay
from sentinel_hooks.skills.injection import SkillLookup
from sentinel_hooks.store.base import (
    CheckpointStore,
    ContractStore,
    InboxStore,
    SessionStore,
    UsageStore,
    WatcherStore,
)
from sentinel_hooks.store.records import Contract
from sentinel_hooks.store.shortcuts import get_checkpoint

if TYPE_CHECKING:
    from sentinel_hooks.callbacks.queues.stream import StreamSettings

log = logging.getLogger(__name__)


class HookRoles(SessionStore, CheckpointStore, ContractStore, WatcherStore, InboxStore, UsageStore, Protocol):
    """The store roles the hook sessions' parts call: the session runner's (``SessionRoles``),
    its queue's (``QueueRoles``) and the approval resumer's (``ApprovalRoles``)."""


class HookSessions:
    """Runs a hook session for every accepted callback."""

    def __init__(
        self,
        *,
        store: HookRoles,
        clock: Clock,
        service: ServiceConfig,
        relay: Relay,
        inbox: Inbox,
        redactor: Redactor,
        work_dir: Path,
        skill: SkillLookup,
        watcher: Callable[[str], AnyWatcher | None],
        events: Events | None = None,
        stream: StreamSettings | None = None,
        requeue: Callable[[Contract], Awaitable[None]] | None = None,
        mcp: McpServers | None = None,
        audit: Audit = no_audit,
    ) -> None:
        """``requeue``: where a session goes once its approval is decided (default: this queue;
        a service whose callbacks go to another sink sends them there too). ``mcp``: the
        connections to ``mcpServers`` (started and stopped by the service). ``audit``: where an
        approval this replica expires is recorded (the service's audit trail)."""
        self._store = store
        self.backends: dict[str, ModelBackend] = {
            name: create_backend(name, spec) for name, spec in service.models.items()
        }
        judges = Judges(service.action_policy.judge_rules, self.backends)
        self.gate = CommandGate(
            policy=service.action_policy,
            inbox=inbox,
            work_dir=work_dir,
            secrets=redactor.secrets,
            judges=judges,
        )
        self.mcp = (
            McpGate(servers=mcp, policy=service.action_policy, inbox=inbox, redactor=redactor, judges=judges)
            if mcp is not None
            else None
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
                judges=judges,
                mcp=self.mcp,
            )
        )
        context = QueueContext(
            store=store,
            clock=clock,
            concurrency=service.hook_concurrency,
            events=events,
            stream=stream,
            resume_window_ms=2 * service.hook_session_max_ms,  # a session may start late in its queue
        )
        self.queue: SessionQueue = create_session_queue(
            "local" if stream is None else "redis-stream", self.runner, context
        )
        self.approvals = ApprovalResumer(
            store=store,
            clock=clock,
            inbox=inbox,
            gate=self.gate,
            relay=relay,
            requeue=requeue or self.queue.requeue,
            append=self.runner.append,
            timeout_ms=service.action_policy.approval_timeout_ms,
            mcp=self.mcp,
            audit=audit,
        )

    async def submit(self, envelope: Envelope, contract: Contract) -> None:
        await self.queue.submit(envelope, contract)

    async def requeue(self, contract: Contract) -> None:
        await self.queue.requeue(contract)

    async def rejoin(self, group: Contract) -> None:
        """Fires joined ``group`` after its page (SPEC §19): a session that had ended (``done``)
        is marked ``rejoined`` and queued again under the same session key, so it runs on from
        its transcript with the joins as a new message (``SessionRunner``); a session still
        running or paused is handed them before its next model call anyway."""
        key = progress_key(group.callback_id)
        if (await get_checkpoint(self._store, key) or {}).get("status") != "done":
            return
        await self._store.put_checkpoint(key, {"status": REJOINED})
        await self.queue.requeue(group)

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
