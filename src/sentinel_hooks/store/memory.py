"""``MemoryStore``: the Store contract in plain dicts, for tests and ``memory://``.

It does no I/O and keeps nothing across processes. Values are kept as the same JSON text the
durable stores keep, so it copies what goes in and out and refuses non-JSON exactly like them.
Atomicity under asyncio comes from construction: no method awaits between its first read and
its last write, so concurrent tasks (one event loop) see each operation whole. It is not
thread-safe; use it from one event loop. Contracts, inbox items and deliveries live in
``memory_tables.MemoryTable`` (listing and claiming).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from sentinel_hooks.clock import iso
from sentinel_hooks.errors import StoreUnavailable
from sentinel_hooks.store import codec
from sentinel_hooks.store.contract_states import (
    after_approval_decided,
    after_approval_requested,
    after_notify,
    after_notify_delivered,
    after_notify_failed,
    is_notify_kind,
    kind_of_key,
)
from sentinel_hooks.store.memory_tables import MemoryTable, MemoryTranscripts, Row
from sentinel_hooks.store.paging import check_positive, to_page
from sentinel_hooks.store.pruning import (
    CLOSED_INBOX_STATUSES,
    OPEN_CONTRACT_STATES,
    PRUNED_CONTRACT_STATES,
    TRIM_PER_CONTRACT,
    PruneBefore,
    Pruned,
    cutoff_text,
    older,
)
from sentinel_hooks.store.records import (
    Contract,
    ContractState,
    Delivery,
    DeliveryOutcome,
    DeliveryState,
    InboxHistoryEntry,
    InboxItem,
    InboxKind,
    InboxStatus,
    Moved,
    NotifyStart,
    Observation,
    Page,
    Recorded,
    SettledState,
    Settlement,
    TranscriptEntry,
    apply_outcome,
    as_deduped,
    check_acceptable,
    check_outcome,
    check_settlement,
    first_history_entry,
    settle,
    stored_state,
    to_epoch_ms,
    transition,
    utc_ms,
)

_DEDUPE_PRUNE_EVERY = 256


class MemoryStore:
    """The Store contract held in this process's memory (see ``store.base.Store``)."""

    def __init__(self) -> None:
        self._open = False
        self._watcher_states: dict[str, str] = {}
        self._observations: dict[str, list[str]] = {}
        self._contracts = MemoryTable()
        self._envelopes: dict[str, str] = {}
        self._dedupe: dict[str, int] = {}
        self._dedupe_adds = 0
        self._transcripts = MemoryTranscripts()
        self._checkpoints: dict[str, str] = {}
        self._inbox = MemoryTable()
        self._inbox_history: dict[str, list[str]] = {}
        self._deliveries = MemoryTable()

    def __repr__(self) -> str:
        return "MemoryStore()"

    def _check_open(self) -> None:
        if not self._open:
            raise StoreUnavailable("memory store is not open; call `await store.open()` first")

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> None:
        """Make the store usable (data from before a ``close`` is still there)."""
        self._open = True

    async def close(self) -> None:
        """Refuse further calls until reopened; keeps the data."""
        self._open = False

    async def ping(self) -> None:
        """Succeed while open."""
        self._check_open()

    # -- watcher runtime state ---------------------------------------------------------------

    async def get_watcher_state(self, watcher_id: str) -> dict[str, Any] | None:
        """See ``Store.get_watcher_state``."""
        self._check_open()
        text = self._watcher_states.get(watcher_id)
        return None if text is None else codec.loads_dict(text, what="watcher state")

    async def put_watcher_state(self, watcher_id: str, state: dict[str, Any]) -> None:
        """See ``Store.put_watcher_state``."""
        self._check_open()
        self._watcher_states[watcher_id] = codec.dumps(state, what=f"state of {watcher_id!r}")

    async def delete_watcher_state(self, watcher_id: str) -> None:
        """See ``Store.delete_watcher_state``."""
        self._check_open()
        self._watcher_states.pop(watcher_id, None)

    async def list_watcher_states(self) -> dict[str, dict[str, Any]]:
        """See ``Store.list_watcher_states``."""
        self._check_open()
        return {
            wid: codec.loads_dict(text, what="watcher state") for wid, text in self._watcher_states.items()
        }

    # -- observations ------------------------------------------------------------------------

    async def record_observation(self, watcher_id: str, obs: Observation, *, keep: int = 500) -> None:
        """See ``Store.record_observation``."""
        self._check_open()
        check_positive(keep, "keep")
        history = self._observations.setdefault(watcher_id, [])
        history.append(codec.dump_record(obs))
        del history[: max(0, len(history) - keep)]

    async def last_observation(self, watcher_id: str) -> Observation | None:
        """See ``Store.last_observation``."""
        self._check_open()
        history = self._observations.get(watcher_id)
        return codec.load_record(Observation, history[-1]) if history else None

    async def observations(
        self, watcher_id: str, *, limit: int = 100, since: datetime | None = None
    ) -> list[Observation]:
        """See ``Store.observations``."""
        self._check_open()
        check_positive(limit)
        since = None if since is None else utc_ms(since)
        found: list[Observation] = []
        for text in reversed(self._observations.get(watcher_id, [])):
            obs = codec.load_record(Observation, text)
            if since is not None and obs.at < since:
                continue
            found.append(obs)
            if len(found) == limit:
                break
        return found

    # -- contracts ---------------------------------------------------------------------------

    async def create_contract(self, contract: Contract, envelope: dict[str, Any]) -> bool:
        """See ``Store.create_contract``."""
        self._check_open()
        cid = contract.callback_id
        envelope_text = codec.dumps(envelope, what=f"envelope of {cid!r}")
        row = Row(
            doc=codec.dump_record(contract),
            created_ms=to_epoch_ms(contract.created_at),
            due_ms=to_epoch_ms(contract.deadline) if contract.state == "pending" else None,
            tags={"watcher_id": contract.watcher_id, "state": contract.state},
        )
        if not self._contracts.insert(cid, row):
            return False
        self._envelopes[cid] = envelope_text
        return True

    async def get_contract(self, callback_id: str) -> Contract | None:
        """See ``Store.get_contract``."""
        self._check_open()
        row = self._contracts.get(callback_id)
        return None if row is None else codec.load_record(Contract, row.doc)

    async def get_envelope(self, callback_id: str) -> dict[str, Any] | None:
        """See ``Store.get_envelope``."""
        self._check_open()
        text = self._envelopes.get(callback_id)
        return None if text is None else codec.loads_dict(text, what="envelope")

    async def list_contracts(
        self,
        *,
        watcher_id: str | None = None,
        state: ContractState | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[Contract]:
        """See ``Store.list_contracts``."""
        self._check_open()
        filters = {"watcher_id": watcher_id, "state": state}
        rows = self._contracts.page(filters, limit, cursor)
        return to_page(rows, limit, lambda doc: codec.load_record(Contract, doc))

    async def claim_due(self, now: datetime, *, limit: int = 100, lease_ms: int = 30000) -> list[Contract]:
        """See ``Store.claim_due``."""
        self._check_open()
        docs = self._contracts.claim(to_epoch_ms(now), limit, lease_ms)
        return [codec.load_record(Contract, doc) for doc in docs]

    async def claim_due_with_envelopes(
        self, now: datetime, *, limit: int = 100, lease_ms: int = 30000
    ) -> list[tuple[Contract, dict[str, Any]]]:
        """See ``Store.claim_due_with_envelopes``."""
        claimed = await self.claim_due(now, limit=limit, lease_ms=lease_ms)
        return [
            (c, codec.loads_dict(self._envelopes.get(c.callback_id, "{}"), what="envelope")) for c in claimed
        ]

    async def settle_contract(
        self,
        callback_id: str,
        state: SettledState,
        *,
        at: datetime,
        deliveries: Sequence[Delivery] = (),
    ) -> bool:
        """See ``Store.settle_contract``."""
        won = await self.settle_contracts([Settlement(callback_id, state, tuple(deliveries))], at=at)
        return callback_id in won

    # -- dedupe ------------------------------------------------------------------------------

    async def add_dedupe(self, key: str, *, ttl_ms: int, now: datetime) -> bool:
        """See ``Store.add_dedupe``."""
        self._check_open()
        now_ms = to_epoch_ms(now)
        check_positive(ttl_ms, "ttl_ms")
        self._dedupe_adds += 1
        if self._dedupe_adds % _DEDUPE_PRUNE_EVERY == 0:
            self._dedupe = {k: exp for k, exp in self._dedupe.items() if exp > now_ms}
        expires_ms = self._dedupe.get(key)
        if expires_ms is not None and expires_ms > now_ms:
            return False
        self._dedupe[key] = now_ms + ttl_ms
        return True

    # -- sessions ----------------------------------------------------------------------------

    async def append_transcript(
        self, session_key: str, entries: Sequence[dict[str, Any]], *, at: datetime
    ) -> list[TranscriptEntry]:
        """See ``Store.append_transcript``."""
        self._check_open()
        return self._transcripts.append(session_key, entries, at)

    async def get_transcript(
        self, session_key: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[TranscriptEntry]:
        """See ``Store.get_transcript``."""
        self._check_open()
        count = None if limit is None else check_positive(limit)
        return self._transcripts.read(session_key, after_seq, count)

    async def replace_transcript(
        self, session_key: str, entries: Sequence[dict[str, Any]], *, at: datetime
    ) -> list[TranscriptEntry]:
        """See ``Store.replace_transcript``."""
        self._check_open()
        return self._transcripts.replace(session_key, entries, at)

    async def put_checkpoint(self, session_key: str, data: dict[str, Any]) -> None:
        """See ``Store.put_checkpoint``."""
        self._check_open()
        self._checkpoints[session_key] = codec.dumps(data, what=f"checkpoint of {session_key!r}")

    async def get_checkpoint(self, session_key: str) -> dict[str, Any] | None:
        """See ``Store.get_checkpoint``."""
        self._check_open()
        text = self._checkpoints.get(session_key)
        return None if text is None else codec.loads_dict(text, what="checkpoint")

    async def delete_checkpoint(self, session_key: str) -> None:
        """See ``Store.delete_checkpoint``."""
        self._check_open()
        self._checkpoints.pop(session_key, None)

    # -- inbox -------------------------------------------------------------------------------

    async def create_inbox_item(self, item: InboxItem) -> bool:
        """See ``Store.create_inbox_item``."""
        self._check_open()
        first = codec.dump_record(first_history_entry(item))
        row = Row(
            doc=codec.dump_record(item),
            created_ms=to_epoch_ms(item.created_at),
            tags={"status": item.status, "kind": item.kind},
        )
        if not self._inbox.insert(item.id, row):
            return False
        self._inbox_history[item.id] = [first]
        return True

    async def get_inbox_item(self, item_id: str) -> InboxItem | None:
        """See ``Store.get_inbox_item``."""
        self._check_open()
        row = self._inbox.get(item_id)
        return None if row is None else codec.load_record(InboxItem, row.doc)

    async def list_inbox(
        self,
        *,
        status: InboxStatus | None = None,
        kind: InboxKind | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[InboxItem]:
        """See ``Store.list_inbox``."""
        self._check_open()
        rows = self._inbox.page({"status": status, "kind": kind}, limit, cursor)
        return to_page(rows, limit, lambda doc: codec.load_record(InboxItem, doc))

    async def transition_inbox_item(
        self,
        item_id: str,
        *,
        from_statuses: Collection[InboxStatus],
        to_status: InboxStatus,
        actor: str,
        note: str | None,
        at: datetime,
    ) -> InboxItem | None:
        """See ``Store.transition_inbox_item``."""
        self._check_open()
        row = self._inbox.get(item_id)
        if row is None or row.tags["status"] not in from_statuses:
            return None
        item = codec.load_record(InboxItem, row.doc)
        moved, entry = transition(item, to_status=to_status, actor=actor, note=note, at=at)
        entry_text = codec.dump_record(entry)
        row.doc, row.tags["status"] = codec.dump_record(moved), moved.status
        self._inbox_history[item_id].append(entry_text)
        return moved

    async def inbox_history(self, item_id: str) -> list[InboxHistoryEntry]:
        """See ``Store.inbox_history``."""
        self._check_open()
        texts = self._inbox_history.get(item_id, [])
        return [codec.load_record(InboxHistoryEntry, t) for t in texts]

    # -- outbox ------------------------------------------------------------------------------

    async def enqueue_delivery(self, delivery: Delivery) -> bool:
        """See ``Store.enqueue_delivery``."""
        self._check_open()
        return self._deliveries.insert(*_delivery_row(delivery))

    async def claim_deliveries(
        self, now: datetime, *, limit: int = 100, lease_ms: int = 30000
    ) -> list[Delivery]:
        """See ``Store.claim_deliveries``."""
        self._check_open()
        docs = self._deliveries.claim(to_epoch_ms(now), limit, lease_ms)
        return [codec.load_record(Delivery, doc) for doc in docs]

    async def update_delivery(
        self,
        key: str,
        *,
        state: DeliveryState,
        attempts: int,
        next_attempt_at: datetime,
        last_error: str | None,
        at: datetime,
    ) -> Delivery | None:
        """See ``Store.update_delivery``."""
        outcome = DeliveryOutcome(key, state, attempts, next_attempt_at, last_error, at)
        updated = await self.update_deliveries([outcome])
        return updated[0] if updated else None

    async def get_delivery(self, key: str) -> Delivery | None:
        """See ``Store.get_delivery``."""
        self._check_open()
        row = self._deliveries.get(key)
        return None if row is None else codec.load_record(Delivery, row.doc)

    async def list_deliveries(self, callback_id: str) -> list[Delivery]:
        """See ``Store.list_deliveries``."""
        self._check_open()
        docs = self._deliveries.oldest_first({"callback_id": callback_id})
        return [codec.load_record(Delivery, doc) for doc in docs]

    # -- batched steps -----------------------------------------------------------------------

    async def get_envelopes(self, callback_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """See ``Store.get_envelopes``."""
        self._check_open()
        found = {cid: self._envelopes.get(cid) for cid in callback_ids}
        return {cid: codec.loads_dict(t, what="envelope") for cid, t in found.items() if t is not None}

    async def get_checkpoints(self, session_keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """See ``Store.get_checkpoints``."""
        self._check_open()
        found = {key: self._checkpoints.get(key) for key in session_keys}
        return {key: codec.loads_dict(t, what="checkpoint") for key, t in found.items() if t is not None}

    async def settle_contracts(self, settlements: Sequence[Settlement], *, at: datetime) -> set[str]:
        """See ``Store.settle_contracts``."""
        self._check_open()
        for s in settlements:
            check_settlement(s)
        won: set[str] = set()
        for s in settlements:
            row = self._contracts.get(s.callback_id)
            if row is None or row.tags["state"] != "pending":
                continue
            settled = settle(codec.load_record(Contract, row.doc), s.state, at=at)
            outbox = [_delivery_row(d) for d in s.deliveries]
            row.doc, row.tags["state"], row.due_ms = codec.dump_record(settled), s.state, None
            for key, delivery_row in outbox:
                self._deliveries.insert(key, delivery_row)
            won.add(s.callback_id)
        return won

    async def update_deliveries(self, outcomes: Sequence[DeliveryOutcome]) -> list[Delivery]:
        """See ``Store.update_deliveries``."""
        return (await self._update(outcomes))[0]

    async def _update(
        self, outcomes: Sequence[DeliveryOutcome]
    ) -> tuple[list[Delivery], dict[str, ContractState]]:
        self._check_open()
        changes: list[tuple[Row, Delivery]] = []
        finals: list[tuple[str, bool, datetime]] = []
        for outcome in outcomes:  # every new doc first: a bad outcome writes nothing
            row = self._deliveries.get(outcome.key)
            if row is not None:
                current = codec.load_record(Delivery, row.doc)
                if current.state == "pending" and outcome.state != "pending" and is_notify_kind(current.kind):
                    finals.append((current.callback_id, outcome.state == "delivered", outcome.at))
                changes.append((row, apply_outcome(current, outcome)))
        for row, updated in changes:
            _, fresh = _delivery_row(updated)
            row.doc, row.due_ms = fresh.doc, fresh.due_ms
        return [updated for _, updated in changes], self._notify_outcomes(finals)

    async def record_outcomes(self, outcomes: Sequence[DeliveryOutcome]) -> Recorded:
        """See ``Store.record_outcomes``."""
        for outcome in outcomes:
            check_outcome(outcome)
        updated, moved = await self._update(outcomes)
        return Recorded(frozenset(delivery.key for delivery in updated), moved)

    async def accept_contract(
        self,
        contract: Contract,
        envelope: dict[str, Any],
        *,
        dedupe_key: str | None = None,
        dedupe_ttl_ms: int = 0,
        checkpoints: Mapping[str, dict[str, Any]] | None = None,
    ) -> Contract | None:
        """See ``Store.accept_contract``."""
        self._check_open()
        check_acceptable(contract, dedupe_key, dedupe_ttl_ms)
        cid = contract.callback_id
        texts = {k: codec.dumps(v, what=f"checkpoint of {k!r}") for k, v in (checkpoints or {}).items()}
        codec.dumps(envelope, what=f"envelope of {cid!r}")  # refuse non-JSON before writing anything
        if self._contracts.get(cid) is not None:
            return None
        fresh = True
        if dedupe_key is not None:
            fresh = await self.add_dedupe(dedupe_key, ttl_ms=dedupe_ttl_ms, now=contract.created_at)
        stored = contract if fresh else as_deduped(contract)
        await self.create_contract(stored, envelope)
        if fresh:
            self._checkpoints.update(texts)
        return stored

    # -- contract steps -------------------------------------------------------------------------

    async def begin_notify(
        self, callback_id: str, deliveries: Sequence[Delivery], *, at: datetime
    ) -> NotifyStart | None:
        """See ``Store.begin_notify``."""
        self._check_open()
        to_epoch_ms(at)
        outbox = [_delivery_row(d) for d in deliveries]
        row = self._contracts.get(callback_id)
        if row is None:
            return None
        before = stored_state(row.tags["state"])
        after = after_notify(before)
        if after is None:
            return NotifyStart(before, before)
        inserted = frozenset(key for key, fresh in outbox if self._deliveries.insert(key, fresh))
        self._move(row, after)
        return NotifyStart(before, after, inserted)

    async def pause_contract(self, callback_id: str) -> Moved | None:
        """See ``Store.pause_contract``."""
        self._check_open()
        row = self._contracts.get(callback_id)
        if row is None:
            return None
        before = stored_state(row.tags["state"])
        after = after_approval_requested(before) or before
        self._move(row, after)
        return Moved(before, after)

    async def resume_contract(self, callback_id: str, *, deadline: datetime) -> Moved | None:
        """See ``Store.resume_contract``."""
        self._check_open()
        row = self._contracts.get(callback_id)
        if row is None:
            return None
        before = stored_state(row.tags["state"])
        after = after_approval_decided(before, notifies_pending=self._notifies_pending(callback_id))
        if after is None:
            return Moved(before, before)
        self._move(row, after, deadline=deadline)
        return Moved(before, after)

    def _notifies_pending(self, callback_id: str) -> bool:
        return any(
            row.tags["callback_id"] == callback_id
            and row.due_ms is not None
            and is_notify_kind(kind_of_key(key))
            for key, row in self._deliveries.rows.items()
        )

    def _move(
        self, row: Row, state: ContractState, *, deadline: datetime | None = None, at: datetime | None = None
    ) -> None:
        """Set a contract's state (and deadline); pending ones are due at their deadline."""
        if row.tags["state"] == state and deadline is None:
            return
        contract = codec.load_record(Contract, row.doc)
        changes: dict[str, Any] = {"state": state}
        if deadline is not None:
            changes["deadline"] = utc_ms(deadline)
        if state == "fulfilled" and at is not None:
            changes["settled_at"] = utc_ms(at)
        moved = contract.model_copy(update=changes)
        row.doc, row.tags["state"] = codec.dump_record(moved), state
        row.due_ms = to_epoch_ms(moved.deadline) if state == "pending" else None

    def _notify_outcomes(self, finals: Sequence[tuple[str, bool, datetime]]) -> dict[str, ContractState]:
        """Move each final notify outcome's contract (``contract_states``)."""
        moved: dict[str, ContractState] = {}
        for callback_id, delivered, at in finals:
            row = self._contracts.get(callback_id)
            if row is None:
                continue
            state = stored_state(row.tags["state"])
            if delivered:
                after = after_notify_delivered(state)
            else:
                after = after_notify_failed(state, notifies_pending=self._notifies_pending(callback_id))
            if after is not None:
                self._move(row, after, at=at)
                moved[callback_id] = after
        return moved

    # -- batched watcher writes ----------------------------------------------------------------

    async def write_watcher_batch(
        self,
        observations: Sequence[tuple[str, Observation]],
        states: Mapping[str, dict[str, Any]],
        *,
        keep: int = 500,
    ) -> None:
        """See ``Store.write_watcher_batch`` (encoded first, so a bad state changes nothing)."""
        self._check_open()
        check_positive(keep, "keep")
        docs = [(wid, codec.dump_record(obs)) for wid, obs in observations]
        texts = {wid: codec.dumps(state, what=f"state of {wid!r}") for wid, state in states.items()}
        for wid, doc in docs:
            history = self._observations.setdefault(wid, [])
            history.append(doc)
            del history[: max(0, len(history) - keep)]
        self._watcher_states.update(texts)

    # -- retention ------------------------------------------------------------------------------

    async def prune(self, before: PruneBefore, *, limit: int = 500) -> Pruned:
        """See ``Store.prune`` (the rules: ``store.pruning``)."""
        self._check_open()
        check_positive(limit)
        done = Pruned()
        if before.callbacks is not None:
            done += self._prune_contracts(before, before.callbacks, limit)
        if before.inbox is not None:
            done += self._prune_inbox(before.inbox, limit)
        if before.sessions is not None:
            done += self._prune_sessions(before, before.sessions, limit)
        return done

    def _prune_contracts(self, before: PruneBefore, cutoff: datetime, limit: int) -> Pruned:
        cutoff_ms, cutoff_at = to_epoch_ms(cutoff), cutoff_text(cutoff)
        busy = {row.tags["callback_id"] for row in self._deliveries.rows.values() if row.due_ms is not None}
        old = sorted(
            (row.created_ms, cid)
            for cid, row in self._contracts.rows.items()
            if row.tags["state"] in PRUNED_CONTRACT_STATES and row.created_ms < cutoff_ms and cid not in busy
        )
        chosen: list[Contract] = []
        for _, cid in old:
            found = codec.load_record(Contract, self._contracts.rows[cid].doc)
            if older(iso(found.settled_at) if found.settled_at else None, cutoff_at):
                chosen.append(found)
                if len(chosen) == limit:
                    break
        deliveries = 0
        for found in chosen:
            cid = found.callback_id
            del self._contracts.rows[cid]
            self._envelopes.pop(cid, None)
            keys = [k for k, row in self._deliveries.rows.items() if row.tags["callback_id"] == cid]
            for key in keys:
                del self._deliveries.rows[key]
            deliveries += len(keys)
            for prefix in before.callback_checkpoints:
                self._checkpoints.pop(prefix + cid, None)

        def trimmable(entry: TranscriptEntry) -> bool:
            cid = entry.entry.get("callbackId")
            return iso(entry.at) < cutoff_at and not (isinstance(cid, str) and cid in self._contracts.rows)

        cap = TRIM_PER_CONTRACT * len(chosen)
        trimmed = 0
        for session in dict.fromkeys(c.session_key for c in chosen):
            trimmed += self._transcripts.trim_head(session, trimmable, cap - trimmed)
        more = len(chosen) == limit or (trimmed == cap > 0)
        return Pruned(contracts=len(chosen), deliveries=deliveries, transcript_entries=trimmed, more=more)

    def _prune_inbox(self, cutoff: datetime, limit: int) -> Pruned:
        cutoff_ms, cutoff_at = to_epoch_ms(cutoff), cutoff_text(cutoff)
        old = sorted(
            (row.created_ms, item_id)
            for item_id, row in self._inbox.rows.items()
            if row.tags["status"] in CLOSED_INBOX_STATUSES and row.created_ms < cutoff_ms
        )
        chosen: list[str] = []
        for _, item_id in old:
            item = codec.load_record(InboxItem, self._inbox.rows[item_id].doc)
            if older(iso(item.updated_at), cutoff_at):
                chosen.append(item_id)
                if len(chosen) == limit:
                    break
        for item_id in chosen:
            del self._inbox.rows[item_id]
            self._inbox_history.pop(item_id, None)
        return Pruned(inbox_items=len(chosen), more=len(chosen) == limit)

    def _prune_sessions(self, before: PruneBefore, cutoff: datetime, limit: int) -> Pruned:
        cutoff_ms = to_epoch_ms(cutoff)
        idle = sorted((ms, key) for key, ms in self._transcripts.last_ms.items() if ms < cutoff_ms)
        open_sessions = {
            codec.load_record(Contract, row.doc).session_key
            for row in self._contracts.rows.values()
            if row.tags["state"] in OPEN_CONTRACT_STATES
        }
        chosen = [key for _, key in idle if key not in open_sessions][:limit]
        entries = 0
        for key in chosen:
            entries += self._transcripts.drop(key)
            for prefix in before.session_checkpoints:
                self._checkpoints.pop(prefix + key, None)
        return Pruned(sessions=len(chosen), transcript_entries=entries, more=len(chosen) == limit)


def _delivery_row(d: Delivery) -> tuple[str, Row]:
    due_ms = to_epoch_ms(d.next_attempt_at) if d.state == "pending" else None
    row = Row(codec.dump_record(d), to_epoch_ms(d.created_at), due_ms, {"callback_id": d.callback_id})
    return d.key, row
