"""What the faces ask of a running service: the HTTP API (and through it the CLI and the web page).

``ServiceOperations`` is mixed into ``Service``. Each method answers one question or makes one
change through the service's parts, so a route knows these methods and never the store, the
watcher manager, the inbox or the intake. HTTP stays in the routes: they parse requests, check
what only HTTP knows (bodies, headers, who may do what through the API) and shape the JSON.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from sentinel_hooks.callbacks.intake.intake import CallbackIntake, message_key
from sentinel_hooks.callbacks.intake.silences import Muting, Silences, watcher_facts
from sentinel_hooks.callbacks.mcp.client import McpServers
from sentinel_hooks.callbacks.sessions.budgets import day_usage
from sentinel_hooks.canonical import sha256_hex
from sentinel_hooks.clock import Clock, iso
from sentinel_hooks.config.budgets import WatcherBudget
from sentinel_hooks.config.linemap import LineMap
from sentinel_hooks.config.loaded import LoadedWatcher
from sentinel_hooks.config.loader import LoadedConfig, validate_watcher
from sentinel_hooks.config.secrets import Redactor, masked_credentials
from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.config.watcher import AnyWatcher
from sentinel_hooks.core.checks import MatchMode
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.core.roles import Who
from sentinel_hooks.core.silences import Matcher
from sentinel_hooks.core.usage import Usage, fire_key
from sentinel_hooks.delivery.targets.base import Target
from sentinel_hooks.delivery.targets.slack_buttons import Action, done_line
from sentinel_hooks.errors import ConfigError, ConfigIssue, Conflict, NotFound, StoreError
from sentinel_hooks.inbox.items import Inbox, callback_items
from sentinel_hooks.inbox.severity import severity_for
from sentinel_hooks.metrics import Metrics
from sentinel_hooks.relay.escalation import chain_status
from sentinel_hooks.report import build_report
from sentinel_hooks.store.audit import AuditAction, AuditEntry
from sentinel_hooks.store.base import (
    AuditStore,
    CheckpointStore,
    ContractStore,
    FeedbackStore,
    InboxStore,
    OutboxStore,
    SessionStore,
    UsageStore,
)
from sentinel_hooks.store.feedback import Feedback
from sentinel_hooks.store.health import WriteCheck
from sentinel_hooks.store.records import (
    Contract,
    ContractState,
    Delivery,
    InboxHistoryEntry,
    InboxItem,
    InboxKind,
    InboxStatus,
    Page,
    TranscriptEntry,
)
from sentinel_hooks.store.shortcuts import get_checkpoint, get_envelope
from sentinel_hooks.store.silences import Silence, SilenceState
from sentinel_hooks.watchers.manager import WatcherManager, api_source
from sentinel_hooks.watchers.pipeline import Outcome
from sentinel_hooks.watchers.runner import WatcherRunner

METRICS_LINES_PER_TURN = 2_000  # per-watcher lines written per turn of the event loop (~2 ms)

CALLBACK_TRANSCRIPT = 200  # the session's first entries searched for one callback's
STATUS_COUNT_PAGES = 20  # `sentinel status` counts at most 10,000 contracts of a state ("10000+")
STATUS_SILENCES = 100  # active silences listed by `sentinel status`
STATUS_HEARTBEATS = 100  # heartbeat watchers listed by `sentinel status` (overdue first)
HEARTBEAT_KEYS = ("lastPingAt", "lastPingKind", "nextDueAt", "overdue")
SLACK_SILENCE = timedelta(hours=1)  # a page's Silence 1h button


@dataclass(frozen=True)
class CallbackDetail:
    """One callback: its contract, envelope, its entries of the session transcript, its deliveries."""

    contract: Contract
    envelope: Envelope | None
    transcript: list[TranscriptEntry]
    deliveries: list[Delivery]
    conditions: list[dict[str, Any]] | None = None  # a match's leaves with their actual values
    usage: Usage = field(default_factory=Usage)  # what its model calls used (SPEC §20)
    feedback: list[Feedback] = field(default_factory=list)  # the latest per person (SPEC §22)


@dataclass(frozen=True)
class Clicked:
    """What a Slack button did: ``line`` to show on the message (None: nothing changed), whether
    the page or approval is now ``closed`` (its buttons go), and ``reply`` for the person."""

    line: str | None
    closed: bool = False
    reply: str = ""


class OperationsRoles(
    ContractStore,
    SessionStore,
    CheckpointStore,
    OutboxStore,
    InboxStore,
    UsageStore,
    FeedbackStore,
    AuditStore,
    Protocol,
):
    """The store roles the faces' questions read: callbacks with their transcripts, checkpoints,
    deliveries and model usage, and the inbox (every change goes through a part of the service)."""


class ServiceOperations:
    """The operations of ``Service`` that its faces call (the parts below are the service's)."""

    config: LoadedConfig
    store: OperationsRoles
    write_check: WriteCheck
    metrics: Metrics
    redactor: Redactor
    targets: dict[str, Target]
    inbox: Inbox
    intake: CallbackIntake
    manager: WatcherManager
    silences: Silences
    clock: Clock
    mcp: McpServers

    @property
    def settings(self) -> ServiceConfig:
        """``sentinel.yaml`` as loaded at start (a reload applies watcher changes only)."""
        return self.config.service

    # -- health --------------------------------------------------------------------------------

    async def check_writes(self) -> None:
        """Raise ``StoreError`` unless the store takes writes now (what /readyz asks)."""
        await self.write_check.check()

    def mcp_states(self) -> dict[str, str]:
        """Each MCP server's state, for /readyz's details: a failed server is not the service's
        health (its sessions get error results), so it never makes the service unready."""
        return {name: status["state"] for name, status in self.mcp.status().items()}

    def watcher_count(self) -> int:
        return self.manager.count()

    async def metrics_text(self) -> tuple[bytes, str]:
        """The Prometheus text and its content type, gauges refreshed first (``Metrics.render``).

        The per-watcher series (two lines per watcher: 12 MB and ~0.2 s of CPU at 100,000) are
        written on the event loop in pieces of ``METRICS_LINES_PER_TURN``, yielding between
        them, so polls due meanwhile wait one piece at most. In a worker thread the loop would
        wait for the interpreter lock after each of its I/O waits instead (polls late by up to
        seconds during a scrape). The other families are rendered in a worker thread.
        """
        trouble = await self.refresh_gauges()
        parts = []
        for part in self.metrics.watcher_text_parts(METRICS_LINES_PER_TURN, trouble):
            parts.append(part.encode())
            await asyncio.sleep(0)
        parts.append(await asyncio.to_thread(self.metrics.render_families))
        return b"".join(parts), self.metrics.content_type

    async def refresh_gauges(self) -> list[str] | None:
        """Gauges computed at scrape time: watchers by state, open inbox items by kind.

        Returns the watchers whose per-watcher series /metrics exports: None (all of them) up
        to ``limits.perWatcherMetricsMax`` watchers, else the ids of those failing or firing.
        """
        over_limit = self.watcher_count() > self.settings.limits.per_watcher_metrics_max
        counts, trouble = self.manager.status_counts(trouble=over_limit)
        for state, count in counts.items():
            self.metrics.watchers.labels(state).set(count)
        open_items: dict[str, int] = {"escalation": 0, "approval": 0, "delivery_failure": 0}
        cursor: str | None = None
        for _ in range(100):  # at most 50,000 open items are counted per scrape
            page = await self.store.list_inbox(status="open", limit=500, cursor=cursor)
            for item in page.items:
                open_items[item.kind] = open_items.get(item.kind, 0) + 1
            cursor = page.next_cursor
            if not cursor:
                break
        for kind, count in open_items.items():
            self.metrics.inbox_open.labels(kind).set(count)
        return trouble

    # -- watchers ------------------------------------------------------------------------------

    def watchers(self) -> list[WatcherRunner]:
        """Every watcher of this service, by id."""
        return sorted(self.manager.runners(), key=lambda r: r.id)

    def watcher(self, watcher_id: str) -> WatcherRunner:
        """The watcher ``watcher_id``; ``NotFound`` when there is none."""
        return self.manager.get(watcher_id)

    def watcher_status(self, runner: WatcherRunner, muting: Muting) -> dict[str, Any]:
        """The watcher's status in the API's shape (state, last poll, fire and error), with
        ``silencedBy``: the silence or window that mutes its fires now (``muting``, from
        ``self.muting()``; payload matchers are checked against its last observation here), or
        the one that muted its current episode."""
        status = self.manager.status(runner)
        silenced_by = muting.match(watcher_facts(runner.spec, runner.last_observed))
        status["silencedBy"] = silenced_by or runner.state.silenced_episode
        return status

    async def muting(self) -> Muting:
        """The silences and maintenance windows active now (for watcher statuses; while the store
        cannot be read, the ones last read)."""
        return await self.silences.snapshot(stale_ok=True)

    def watcher_definition(self, runner: WatcherRunner) -> dict[str, Any]:
        """The watcher's definition as written, secrets masked: the values that came from the
        environment wherever they are, and the credentials of its keys even when written as
        literals (an API-created watcher can hold no other kind)."""
        definition: dict[str, Any] = self.redactor.data(masked_credentials(runner.spec, runner.loaded.raw))
        return definition

    def validate_watcher(self, data: dict[str, Any]) -> AnyWatcher:
        """A watcher definition sent through the API, checked like a file's; ``ConfigError`` lists
        every issue (keys shown under ``body``)."""
        spec, issues = validate_watcher(
            data,
            display="body",
            lines=LineMap(),
            service=self.settings,
            skills=self.config.skills,
            base_dir=self.config.base_dir,
        )
        if spec is None:
            raise ConfigError(issues or [ConfigIssue("body", None, "", "invalid watcher")])
        return spec

    async def create_watcher(self, spec: AnyWatcher, data: dict[str, Any], who: Who) -> WatcherRunner:
        """Add a watcher validated by ``validate_watcher`` (kept in the store across restarts)."""
        runner = await self.manager.create(LoadedWatcher.of(spec, data, api_source(spec.id)))
        await self.audit(who, "watcher.create", spec.id)
        return runner

    async def set_watcher_enabled(self, watcher_id: str, enabled: bool, who: Who) -> WatcherRunner:
        runner = await self.manager.set_enabled(watcher_id, enabled)
        await self.audit(who, "watcher.enable" if enabled else "watcher.disable", watcher_id)
        return runner

    async def delete_watcher(self, watcher_id: str, who: Who) -> None:
        """Remove an API-created watcher (``Conflict`` for one defined in a file)."""
        await self.manager.delete(watcher_id)
        await self.audit(who, "watcher.delete", watcher_id)

    async def fire(self, watcher_id: str, payload: Any, who: Who) -> Outcome:
        """A manual fire of the watcher with ``payload``."""
        outcome = await self.manager.fire(watcher_id, payload)
        if outcome.contract is not None:
            await self.audit(who, "watcher.fire", watcher_id, f"callback {outcome.contract.callback_id}")
        return outcome

    async def ingest(self, watcher_id: str, value: Any) -> Outcome:
        """An event pushed to a ``webhook`` watcher."""
        return await self.manager.ingest(watcher_id, value)

    async def ingest_alerts(self, watcher_id: str, alerts: list[dict[str, Any]]) -> list[Outcome]:
        """The alerts of a notification pushed to a ``format: alertmanager`` watcher, one
        observation each (``core.alertmanager.alert_observations`` made them)."""
        return await self.manager.ingest_alerts(watcher_id, alerts)

    # -- the inbox -----------------------------------------------------------------------------

    async def inbox_items(
        self, status: InboxStatus | None, kind: InboxKind | None, *, limit: int, cursor: str | None
    ) -> Page[InboxItem]:
        """One page of the inbox, newest first (``status``, ``kind``: None for any)."""
        return await self.inbox.list(status=status, kind=kind, limit=limit, cursor=cursor)

    async def inbox_item(self, item_id: str) -> tuple[InboxItem, list[InboxHistoryEntry]]:
        """The item and its history (oldest first); ``NotFound`` for an unknown id."""
        return await self.inbox.get(item_id)

    async def escalation_status(self, items: Sequence[InboxItem]) -> dict[str, dict[str, Any] | None]:
        """Where each item's escalation chain is (``relay.escalation.chain_status``), by item id:
        read from the item's escalation deliveries, which are keyed by its id."""
        found = await asyncio.gather(*(self.store.list_deliveries(item.id) for item in items))
        pairs = zip(items, found, strict=True)
        return {item.id: chain_status(item, deliveries) for item, deliveries in pairs}

    async def ack(self, item_id: str, *, who: Who, note: str | None = None) -> InboxItem:
        item = await self.inbox.ack(item_id, actor=who.actor, note=note)
        await self.audit(who, "inbox.ack", item_id, note)
        return item

    async def ack_and_silence(
        self, item_id: str, *, who: Who, note: str | None, silence_for_ms: int
    ) -> tuple[InboxItem, Silence]:
        """Ack the item and silence its watcher for ``silence_for_ms`` (SPEC §14); ``Conflict``,
        changing nothing, when the item names no watcher."""
        found, _ = await self.inbox.get(item_id)
        if found.watcher_id is None:
            raise Conflict(f"inbox item {item_id!r} names no watcher, so there is nothing to silence")
        item = await self.inbox.ack(item_id, actor=who.actor, note=note)
        await self.audit(who, "inbox.ack", item_id, note)
        now = self.clock.now()
        silence = await self.silences.create(
            [Matcher(path="watcherId", op="eq", value=found.watcher_id)],
            match="all",
            starts_at=None,
            ends_at=now + timedelta(milliseconds=silence_for_ms),
            comment=note or f"silenced when inbox item {item_id} was acknowledged",
            created_by=who.actor,
        )
        await self.audit(who, "silence.create", silence.id, silence.comment)
        return item, silence

    async def resolve(self, item_id: str, *, who: Who, note: str | None = None) -> InboxItem:
        item = await self.inbox.resolve(item_id, actor=who.actor, note=note)
        await self.audit(who, "inbox.resolve", item_id, note)
        return item

    async def approve(self, item_id: str, *, who: Who, note: str | None = None) -> InboxItem:
        """Approve an approval; its paused session resumes with the command's result."""
        item = await self.inbox.approve(item_id, actor=who.actor, note=note)
        await self.audit(who, "approval.approve", item_id, note)
        return item

    async def deny(self, item_id: str, *, who: Who, note: str | None = None) -> InboxItem:
        """Deny an approval; its paused session resumes with the refusal."""
        item = await self.inbox.deny(item_id, actor=who.actor, note=note)
        await self.audit(who, "approval.deny", item_id, note)
        return item

    # -- callbacks -----------------------------------------------------------------------------

    def target_names(self) -> Collection[str]:
        """The delivery targets an envelope may name."""
        return self.targets.keys()

    async def accept_callback(self, envelope: Envelope) -> Contract:
        """An envelope from another system: dedupe, contract, session, as for a fire."""
        return await self.intake.accept(envelope)

    async def callbacks(
        self, watcher_id: str | None, state: ContractState | None, *, limit: int, cursor: str | None
    ) -> Page[Contract]:
        """One page of callbacks (their contracts), newest first (``watcher_id``, ``state``: None for any)."""
        return await self.store.list_contracts(watcher_id=watcher_id, state=state, limit=limit, cursor=cursor)

    async def callback(self, callback_id: str) -> CallbackDetail | None:
        """The callback ``callback_id`` in full, or None when there is no such callback."""
        contract = await self.store.get_contract(callback_id)
        if contract is None:
            return None
        envelope = await get_envelope(self.store, callback_id)
        entries = await self.store.get_transcript(contract.session_key, limit=CALLBACK_TRANSCRIPT)
        mine = [e for e in entries if e.entry.get("callbackId") == callback_id]
        fired = await get_checkpoint(self.store, message_key(callback_id)) or {}
        conditions = fired.get("conditions")
        deliveries = await self.store.list_deliveries(callback_id)
        follow_ups = len({d.kind for d in deliveries if d.message.get("follow_up") is True})
        usage = await self.store.get_usage([fire_key(callback_id)])
        feedback = await self.store.get_feedback([callback_id])
        return CallbackDetail(
            contract.model_copy(update={"follow_ups": follow_ups}) if follow_ups else contract,
            envelope,
            mine,
            deliveries,
            conditions if isinstance(conditions, list) else None,
            usage.get(fire_key(callback_id), Usage()),
            feedback.get(callback_id, []),
        )

    async def give_feedback(
        self, callback_id: str, who: Who, useful: bool, note: str | None
    ) -> list[Feedback] | None:
        """Keep the feedback of ``who``'s actor on the callback (replacing theirs before) and return the
        callback's feedback now; None when there is no such callback."""
        if await self.store.get_contract(callback_id) is None:
            return None
        before = (await self.store.get_feedback([callback_id])).get(callback_id, [])
        if any(f.person == who.actor and (f.useful, f.note) == (useful, note) for f in before):
            return before  # the same feedback again (a click delivered twice) changes nothing
        given = Feedback(
            callback_id=callback_id, person=who.actor, useful=useful, note=note, at=self.clock.now()
        )
        await self.store.put_feedback(given)
        await self.audit(
            who,
            "feedback",
            callback_id,
            ("useful" if useful else "not useful") + (f": {note}" if note else ""),
        )
        return (await self.store.get_feedback([callback_id])).get(callback_id, [])

    async def report(self, window: timedelta) -> dict[str, Any]:
        """The noise report (``report.build_report``) of the fires of the last ``window``."""
        now = self.clock.now()
        return await build_report(self.store, since=now - window, until=now)

    async def transcript(
        self, session_key: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[TranscriptEntry]:
        """A hook session's transcript entries after ``after_seq``, oldest first (None: all)."""
        return await self.store.get_transcript(session_key, after_seq=after_seq, limit=limit)

    # -- silences (SPEC §14) ---------------------------------------------------------------------

    def now(self) -> datetime:
        """The service's clock (silences' states are relative to it)."""
        return self.clock.now()

    async def silence_page(
        self, state: SilenceState | None, *, limit: int, cursor: str | None
    ) -> Page[Silence]:
        """One page of silences, newest first, in ``state`` now (None: any)."""
        return await self.silences.page(state, limit=limit, cursor=cursor)

    async def silence(self, silence_id: str) -> Silence:
        """The silence; ``NotFound`` for an unknown id."""
        return await self.silences.get(silence_id)

    async def create_silence(
        self,
        matchers: list[Matcher],
        *,
        match: MatchMode,
        starts_at: datetime | None,
        ends_at: datetime,
        comment: str,
        who: Who,
    ) -> Silence:
        """A new silence: applies to this replica's next fire, to other replicas' within a second."""
        silence = await self.silences.create(
            matchers, match=match, starts_at=starts_at, ends_at=ends_at, comment=comment, created_by=who.actor
        )
        await self.audit(who, "silence.create", silence.id, comment)
        return silence

    async def expire_silence(self, silence_id: str, who: Who) -> Silence:
        """End the silence now."""
        silence = await self.silences.expire(silence_id)
        await self.audit(who, "silence.expire", silence_id)
        return silence

    # -- Slack buttons (SPEC §21) -----------------------------------------------------------------

    async def slack_click(self, action: Action, value: str, who: Who) -> Clicked:
        """Do what a Slack button says, as ``who`` (a person, via ``slack``), through the same
        operations as the API. A click that would change nothing (the item already acked, the
        same feedback again, the silence already made) changes nothing and is not audited.
        ``NotFound`` for an id that is not there."""
        now = self.clock.now()
        if action in ("feedback_up", "feedback_down"):
            useful = action == "feedback_up"
            before = (await self.store.get_feedback([value])).get(value, [])
            if await self.give_feedback(value, who, useful, None) is None:
                raise NotFound(f"callback {value!r} not found")
            same = any(f.person == who.actor and f.useful == useful and f.note is None for f in before)
            done = "👍 useful" if useful else "👎 not useful"
            return Clicked(None if same else done_line(done, who.actor, now), reply=f"{done} is recorded")
        if action == "silence_1h":
            return await self._silence_from_slack(value, who)
        moves = {
            "ack": (self.ack, "✔ acked", False),
            "resolve": (self.resolve, "✔ resolved", True),
            "approve": (self.approve, "✅ approved", True),
            "deny": (self.deny, "⛔ denied", True),
        }
        move, done, closes = moves[action]
        item_id = value if action in ("approve", "deny") else (await self._page_item(value, who)).id
        try:
            await move(item_id, who=who, note="from Slack")
        except Conflict as exc:  # already done (or done by someone else): nothing changes
            return Clicked(None, reply=str(exc))
        return Clicked(done_line(done, who.actor, now), closed=closes, reply=f"{done} by {who.actor}")

    async def _page_item(self, callback_id: str, who: Who) -> InboxItem:
        """The inbox item of a page's Ack and Resolve: the fire's escalation item still open or
        acked (else its newest one), or, when the fire has none, one made for the click without
        an escalation chain (its id comes from the callback's, so a second click finds it)."""
        items = await callback_items(self.store, callback_id, ("open", "acked", None))
        if items:
            return items[0]
        contract = await self.store.get_contract(callback_id)
        if contract is None:
            raise NotFound(f"callback {callback_id!r} not found")
        return await self.inbox.create(
            "escalation",
            severity=severity_for(contract.trigger.priority),
            reason=f"page of {contract.watcher_id} taken from Slack by {who.actor}",
            watcher_id=contract.watcher_id,
            callback_id=callback_id,
            session_key=contract.session_key,
            actor=who.actor,
            item_id="SL" + sha256_hex(callback_id)[:24].upper(),
            escalate=False,
        )

    async def _silence_from_slack(self, callback_id: str, who: Who) -> Clicked:
        """Silence the fire's watcher for an hour; again by the same person while it lasts: nothing."""
        contract = await self.store.get_contract(callback_id)
        if contract is None:
            raise NotFound(f"callback {callback_id!r} not found")
        comment = f"silenced from Slack for 1h (callback {callback_id})"
        muting = await self.silences.snapshot()
        if any(s.created_by == who.actor and s.comment == comment for s in muting.silences):
            return Clicked(None, reply="already silenced for an hour")
        now = self.clock.now()
        silence = await self.create_silence(
            [Matcher(path="watcherId", op="eq", value=contract.watcher_id)],
            match="all",
            starts_at=None,
            ends_at=now + SLACK_SILENCE,
            comment=comment,
            who=who,
        )
        until = f"{silence.ends_at:%H:%M} UTC"
        return Clicked(done_line("🔕 silenced 1h", who.actor, now) + f" (until {until})", reply=comment)

    # -- audit (SPEC §21) ------------------------------------------------------------------------

    async def audit(self, who: Who, action: AuditAction, target: str, note: str | None = None) -> None:
        """Record a change that was made: every change of the faces comes through here, after it
        is made, so the trail holds what happened and nothing that was refused."""
        entry = AuditEntry(
            id=uuid.uuid4().hex,
            at=self.clock.now(),
            actor=who.actor,
            claimed_actor=who.claimed_actor,
            via=who.via,
            action=action,
            target=target[:300],
            note=None if note is None else note[:2000],
        )
        await self.store.add_audit(entry)

    async def audit_page(
        self, *, since: datetime | None, actor: str | None, limit: int, cursor: str | None
    ) -> Page[AuditEntry]:
        """One page of the audit trail, newest first."""
        return await self.store.list_audit(since=since, actor=actor, limit=limit, cursor=cursor)

    # -- status (`sentinel status`) ---------------------------------------------------------------

    async def status(self) -> dict[str, Any]:
        """The service at a glance: store, watchers by state, open contracts, open inbox items,
        active silences and maintenance windows."""
        store_ok = True
        try:
            await self.write_check.check()
        except StoreError:
            store_ok = False
        watchers, _ = self.manager.status_counts(trouble=False)
        contracts = {state: await self._count_contracts(state) for state in ("pending", "notifying")}
        contracts["awaitingApproval"] = await self._count_contracts("awaiting_approval")
        open_items = await self.store.list_inbox(status="open", limit=500)
        by_kind: dict[str, int] = {}
        for item in open_items.items:
            by_kind[item.kind] = by_kind.get(item.kind, 0) + 1
        muting = await self.silences.snapshot(stale_ok=True)
        now = self.clock.now()
        return {
            "store": {"type": type(self.store).__name__, "ok": store_ok},
            "watchers": {"total": sum(watchers.values()), **watchers},
            "contracts": contracts,
            "inbox": {
                "open": len(open_items.items),
                "more": open_items.next_cursor is not None,
                "byKind": by_kind,
            },
            "silences": {
                "active": len(muting.silences),
                "items": [s.to_json(now) for s in muting.silences[:STATUS_SILENCES]],
                "windows": [
                    {"name": w.window.name, "startsAt": iso(w.starts_at), "endsAt": iso(w.ends_at)}
                    for w in muting.windows
                ],
            },
            "mcpServers": self.mcp.status(),
            "usage": await day_usage(self.store, self.config.service, self._watcher_budgets(), now),
            "heartbeats": self._heartbeats(),
        }

    def _heartbeats(self) -> list[dict[str, Any]]:
        """The heartbeat watchers' check-ins (``sentinel status``), overdue first, then by id."""
        found = []
        for runner in self.manager.runners():
            if runner.spec.strategy_name == "heartbeat":
                shown = self.manager.status(runner)
                found.append({"id": runner.id, **{key: shown[key] for key in HEARTBEAT_KEYS}})
        found.sort(key=lambda beat: (not beat["overdue"], beat["id"]))
        return found[:STATUS_HEARTBEATS]

    def _watcher_budgets(self) -> dict[str, WatcherBudget]:
        """The watchers' own budgets (``fire.budget``), by watcher id."""
        return {
            runner.id: runner.spec.fire.budget
            for runner in self.manager.runners()
            if runner.spec.fire.budget is not None
        }

    async def _count_contracts(self, state: ContractState) -> int:
        """How many contracts are in ``state`` (at most ``STATUS_COUNT_PAGES`` pages counted)."""
        count, cursor = 0, None
        for _ in range(STATUS_COUNT_PAGES):
            page = await self.store.list_contracts(state=state, limit=500, cursor=cursor)
            count += len(page.items)
            cursor = page.next_cursor
            if cursor is None:
                break
        return count
