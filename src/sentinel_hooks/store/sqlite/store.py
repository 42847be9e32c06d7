"""``SqliteStore``: the Store contract in one SQLite file, the embedded default (one process), or
in memory for tests (``memory://``: the same code, nothing survives ``close``).

Each method is one statement or one ``BEGIN IMMEDIATE`` transaction (``queries``) run
on the worker thread (``worker``), so it is atomic for tasks of this process and for other
processes using the file, and WAL keeps a committed write through a kill -9. Deadlines and
delivery schedules live in the indexed ``due_ms`` column, never only in memory.

One module of about 500 lines because it is one class: each method is a short call into
``queries`` on the worker thread, and the SQL, the schema and the thread already live beside it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from sentinel_hooks.clock import from_ms, iso
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.core.usage import Usage
from sentinel_hooks.store import codec
from sentinel_hooks.store.base import CallbackView, SharedState, TranscriptTail, UsageCount
from sentinel_hooks.store.feedback import Feedback, group_feedback
from sentinel_hooks.store.paging import check_positive, decode_cursor, to_page
from sentinel_hooks.store.pruning import PruneBefore, Pruned, cutoff_text
from sentinel_hooks.store.records import (
    Contract,
    ContractState,
    Delivery,
    DeliveryOutcome,
    GroupRequest,
    InboxHistoryEntry,
    InboxItem,
    InboxKind,
    InboxStatus,
    JoinBatch,
    MemberJoin,
    Moved,
    NoOpenGroup,
    NotifyStart,
    Observation,
    Page,
    Recorded,
    Settlement,
    TranscriptEntry,
    as_deduped,
    as_member,
    check_acceptable,
    check_one_watcher,
    check_outcome,
    check_settlement,
    stored_state,
    to_epoch_ms,
    utc_ms,
)
from sentinel_hooks.store.silences import Silence, SilenceState
from sentinel_hooks.store.sqlite import groups, pacing
from sentinel_hooks.store.sqlite import pruning as prune
from sentinel_hooks.store.sqlite import queries as q
from sentinel_hooks.store.sqlite.audit import SqliteAudit
from sentinel_hooks.store.sqlite.worker import IN_MEMORY, SqliteWorker
from sentinel_hooks.store.turns import TurnBatches

R = TypeVar("R", bound=BaseModel)

TRIM_EVERY = 32  # batched observation writes of a watcher between two trims of its history


class SqliteStore(SqliteAudit):
    """The Store contract in the SQLite file at ``path`` (see ``store.base.Store``)."""

    def __init__(self, path: Path, *, busy_timeout_ms: int = 5000) -> None:
        self.path = path
        self._db = SqliteWorker(path, busy_timeout_ms=busy_timeout_ms)
        self._writes_since_trim: dict[str, int] = {}
        self._history_keep: int | None = None  # the ``keep`` of the latest batch written
        self._accept = TurnBatches[q.AcceptStep, q.Accepted](self._accept_batch)

    @classmethod
    def in_memory(cls) -> SqliteStore:
        """A store in memory (``memory://``): for tests; its data ends with ``close``."""
        return cls(IN_MEMORY)

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    @property
    def shared(self) -> SharedState | None:
        """None: one process owns the file (``Store.shared``)."""
        return None

    async def open(self) -> None:
        """Create the directory, file and schema as needed and connect."""
        await self._db.start()

    async def close(self) -> None:
        """Close the connection and its thread; idempotent."""
        await self._db.stop()

    async def ping(self) -> None:
        """Count one more write in the one-row ``health`` table (a real write to the file)."""
        sql = """INSERT INTO health (id, writes) VALUES (1, 1)
            ON CONFLICT (id) DO UPDATE SET writes = writes + 1"""
        await self._exec("ping (a write to the health row)", sql)

    async def _exec(self, what: str, sql: str, *args: Any) -> int:
        return await self._db.write(what, partial(q.rowcount, sql=sql, args=args))

    async def _one(self, what: str, sql: str, *args: Any) -> str | None:
        row = await self._db.read(what, lambda c: c.execute(sql, args).fetchone())
        return None if row is None else str(row[0])

    async def _record(self, what: str, model: type[R], sql: str, *args: Any) -> R | None:
        text = await self._one(what, sql, *args)
        return None if text is None else codec.load_record(model, text)

    async def _records(self, what: str, model: type[R], sql: str, *args: Any) -> list[R]:
        rows = await self._db.read(what, lambda c: c.execute(sql, args).fetchall())
        return [codec.load_record(model, row[0]) for row in rows]

    async def _page(
        self,
        table: str,
        id_col: str,
        filters: Mapping[str, str | None],
        limit: int,
        cursor: str | None,
        model: type[R],
    ) -> Page[R]:
        after = None if cursor is None else decode_cursor(cursor)
        fetch = check_positive(limit) + 1
        read = partial(q.page, table=table, id_col=id_col, filters=filters, after=after)
        rows = await self._db.read(f"list {table}", partial(read, fetch=fetch))
        return to_page(rows, limit, lambda doc: codec.load_record(model, doc))

    # -- watchers: runtime state and history -------------------------------------------------

    async def list_watcher_states(self, prefix: str = "") -> dict[str, dict[str, Any]]:
        """See ``Store.list_watcher_states`` (a prefix compared as text: no LIKE wildcards to escape)."""
        sql = "SELECT watcher_id, state FROM watcher_states WHERE substr(watcher_id, 1, length(?1)) = ?1"
        rows = await self._db.read("list watcher states", lambda c: c.execute(sql, (prefix,)).fetchall())
        return {wid: codec.loads_dict(text, what="watcher state") for wid, text in rows}

    async def get_watcher_states(self, watcher_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """See ``Store.get_watcher_states`` (one statement; the ids travel as one JSON array)."""
        sql = """SELECT watcher_id, state FROM watcher_states
            WHERE watcher_id IN (SELECT value FROM json_each(?))"""
        ids = codec.dumps(list(watcher_ids), what="watcher ids")
        rows = await self._db.read("get watcher states", lambda c: c.execute(sql, (ids,)).fetchall())
        return {wid: codec.loads_dict(text, what="watcher state") for wid, text in rows}

    async def last_observations(self, watcher_ids: Sequence[str]) -> dict[str, Observation]:
        """See ``Store.last_observations`` (one statement: an index seek per watcher)."""
        sql = """SELECT w.value, (SELECT doc FROM observations o WHERE o.watcher_id = w.value
            ORDER BY o.id DESC LIMIT 1) FROM json_each(?) w"""
        ids = codec.dumps(list(watcher_ids), what="watcher ids")
        rows = await self._db.read("last observations", lambda c: c.execute(sql, (ids,)).fetchall())
        return {wid: codec.load_record(Observation, doc) for wid, doc in rows if doc is not None}

    async def observations(
        self, watcher_id: str, *, limit: int = 100, since: datetime | None = None
    ) -> list[Observation]:
        """See ``Store.observations``: the newest ``keep`` rows only (a history trimmed every
        ``TRIM_EVERY`` writes may hold more), those at ≥ ``since`` among them."""
        since_ms = None if since is None else to_epoch_ms(since)
        sql = """SELECT doc FROM (SELECT id, at_ms, doc FROM observations WHERE watcher_id = ?
            ORDER BY id DESC LIMIT ?) WHERE (? IS NULL OR at_ms >= ?) ORDER BY id DESC LIMIT ?"""
        kept = -1 if self._history_keep is None else self._history_keep  # -1: no limit
        args = (watcher_id, kept, since_ms, since_ms, check_positive(limit))
        return await self._records("observations", Observation, sql, *args)

    async def write_watcher_batch(
        self,
        observations: Sequence[tuple[str, Observation]],
        states: Mapping[str, dict[str, Any] | None],
        *,
        keep: int = 500,
    ) -> None:
        """See ``Store.write_watcher_batch``: one transaction; a watcher's history is trimmed at
        its first batched write, then at every ``TRIM_EVERY``-th (``_due_for_trim``)."""
        keep = self._history_keep = check_positive(keep, "keep")
        rows = [(wid, to_epoch_ms(obs.at), codec.dump_record(obs)) for wid, obs in observations]
        texts = [
            (wid, None if state is None else codec.dumps(state, what=f"state of {wid!r}"))
            for wid, state in states.items()
        ]
        if rows or texts:
            trim = self._due_for_trim([wid for wid, _ in observations])

            def write(c: q.Conn) -> None:
                q.write_watcher_batch(c, rows, texts, keep=keep, trim=trim)

            await self._db.write("write watcher batch", write)

    def _due_for_trim(self, watcher_ids: Sequence[str]) -> list[str]:
        """The watchers whose history this batch trims back to ``keep``.

        The trim walks ``keep`` index entries per watcher (~45 µs with 500 kept): done on every
        poll of 10,000 watchers it cost more than the insert. Trimming a watcher every
        ``TRIM_EVERY`` writes lets its history hold up to ``keep + TRIM_EVERY - 1`` rows between
        trims; reads return the newest ``keep`` at most (``observations``), so no reader sees
        the rows waiting for the next trim.
        """
        due: list[str] = []
        for watcher_id in dict.fromkeys(watcher_ids):
            since = self._writes_since_trim.get(watcher_id, TRIM_EVERY - 1) + 1
            if since >= TRIM_EVERY:
                due.append(watcher_id)
                since = 0
            self._writes_since_trim[watcher_id] = since
        return due

    # -- response contracts ------------------------------------------------------------------

    async def accept_contract(
        self,
        contract: Contract,
        envelope: Envelope,
        *,
        dedupe_key: str | None = None,
        dedupe_ttl_ms: int = 0,
        checkpoints: Mapping[str, dict[str, Any]] | None = None,
        deliveries: Sequence[Delivery] = (),
        group: GroupRequest | None = None,
    ) -> Contract | None:
        """See ``Store.accept_contract``."""
        check_acceptable(contract, dedupe_key, dedupe_ttl_ms, checkpoints, deliveries, group)
        envelope_text = codec.dump_envelope(envelope)
        texts = [(k, codec.dumps(v, what=f"checkpoint of {k!r}")) for k, v in (checkpoints or {}).items()]
        dedupe = None if dedupe_key is None else (dedupe_key, to_epoch_ms(contract.created_at), dedupe_ttl_ms)

        members: list[Contract] = []  # the member made on the store's thread, handed back as is

        def member(group_id: str) -> q.ContractRow:
            members.append(as_member(contract, group_id))
            return q.contract_row(members[-1], envelope_text)

        tx = partial(
            q.accept_contract,
            fire=(contract.callback_id, to_epoch_ms(contract.created_at)),
            pending=lambda: q.contract_row(contract, envelope_text),  # made only when stored so
            deduped=lambda: q.contract_row(as_deduped(contract), envelope_text),  # made only when deduped
            dedupe=dedupe,
            checkpoints=texts,
            deliveries=[q.delivery_row(d) for d in deliveries],
            group=None if group is None else (group, member),
        )
        stored = await self._accept(tx)
        if stored is None:
            return None
        state, group_id = stored
        if state == q.REFUSED:
            raise NoOpenGroup(contract.callback_id)
        if group_id is not None:
            return members[-1] if members else as_member(contract, group_id)
        return contract if state == contract.state else as_deduped(contract)

    async def _accept_batch(self, steps: list[q.AcceptStep]) -> list[q.Accepted | BaseException]:
        """The accepts made in one turn of the event loop (a notification's fires) as one store
        step (``q.accept_contracts``), their group joins listed once."""
        tx = partial(q.accept_contracts, steps=steps)
        results = await self._db.write("accept contracts", tx)
        return [
            self._db.failure("accept contract", result) if isinstance(result, sqlite3.Error) else result
            for result in results
        ]

    # -- groups (SPEC §19) -------------------------------------------------------------------

    async def claim_joins(self, now: datetime, *, limit: int = 100, lease_ms: int = 30000) -> list[JoinBatch]:
        """See ``GroupStore.claim_joins``."""
        check_positive(limit, "limit")
        check_positive(lease_ms, "lease_ms")
        tx = partial(groups.claim_joins, now_ms=to_epoch_ms(now), limit=limit, lease_ms=lease_ms)
        return await self._db.write("claim joins", tx)

    async def join_members(self, group: GroupRequest, members: Sequence[MemberJoin]) -> list[str | None]:
        """See ``GroupStore.join_members`` (one write, sharing the transaction of the writes made
        in the same turn of the event loop)."""
        check_one_watcher(members)
        if not members:
            return []
        return await self._db.write("join members", partial(q.join_members, request=group, members=members))

    async def joins_reported(self, batch: JoinBatch, deliveries: Sequence[Delivery], *, at: datetime) -> bool:
        """See ``GroupStore.joins_reported``."""
        rows = [q.delivery_row(d) for d in deliveries]
        now_ms = to_epoch_ms(at)

        def tx(c: q.Conn) -> bool:
            if not groups.joins_reported(c, batch, now_ms):
                return False
            for row in rows:
                q.insert_delivery(c, row)
            return True

        return await self._db.write("record joins", tx)

    async def member_resolved(self, group_id: str, member_id: str) -> bool:
        """See ``GroupStore.member_resolved``."""
        tx = partial(groups.member_resolved, group_id=group_id, member_id=member_id)
        return await self._db.write("member resolved", tx)

    async def get_contract(self, callback_id: str) -> Contract | None:
        """See ``Store.get_contract``."""
        sql = "SELECT doc FROM contracts WHERE callback_id = ?"
        return await self._record("get contract", Contract, sql, callback_id)

    async def get_contracts(self, callback_ids: Sequence[str]) -> dict[str, Contract]:
        """See ``Store.get_contracts``."""
        sql = "SELECT callback_id, doc FROM contracts WHERE callback_id IN"
        rows = await self._db.read("get contracts", partial(q.select_in, sql=sql, ids=callback_ids))
        return {cid: codec.load_record(Contract, text) for cid, text in rows}

    async def trigger_priorities(self, callback_ids: Sequence[str]) -> set[str]:
        """See ``Store.trigger_priorities`` (taken out of each record's text by SQLite)."""
        sql = "SELECT DISTINCT json_extract(doc, '$.trigger.priority') FROM contracts WHERE callback_id IN"
        rows = await self._db.read("trigger priorities", partial(q.select_in, sql=sql, ids=callback_ids))
        return {str(row[0]) for row in rows if row[0] is not None}

    async def get_envelopes(self, callback_ids: Sequence[str]) -> dict[str, Envelope]:
        """See ``Store.get_envelopes``."""
        sql = "SELECT callback_id, envelope FROM contracts WHERE callback_id IN"
        rows = await self._db.read("envelopes", partial(q.select_in, sql=sql, ids=callback_ids))
        return {cid: codec.load_envelope(text) for cid, text in rows}

    async def list_contracts(
        self,
        *,
        watcher_id: str | None = None,
        state: ContractState | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[Contract]:
        """See ``Store.list_contracts``."""
        filters = {"watcher_id": watcher_id, "state": state}
        return await self._page("contracts", "callback_id", filters, limit, cursor, Contract)

    async def claim_due(
        self, now: datetime, *, limit: int = 100, lease_ms: int = 30000
    ) -> list[tuple[Contract, Envelope | None]]:
        """See ``Store.claim_due``."""
        claim = partial(q.claim, table="contracts", id_col="callback_id", columns="doc, envelope")
        args = {
            "now_ms": to_epoch_ms(now),
            "limit": check_positive(limit),
            "lease_ms": check_positive(lease_ms, "lease_ms"),
        }
        rows = await self._db.write("claim due contracts", partial(claim, **args))
        return [
            (codec.load_record(Contract, doc), codec.load_envelope(envelope) if envelope else None)
            for doc, envelope in rows
        ]

    async def settle_contracts(self, settlements: Sequence[Settlement], *, at: datetime) -> set[str]:
        """See ``Store.settle_contracts``."""
        for s in settlements:
            check_settlement(s)
        at_text = iso(utc_ms(at))  # a naive ``at`` is refused here, not on the worker thread
        rows = [(s.callback_id, s.state, [q.delivery_row(d) for d in s.deliveries]) for s in settlements]
        if not rows:
            return set()
        tx = partial(q.settle_contracts, settlements=rows, at_text=at_text)
        return await self._db.write("settle contracts", tx)

    async def begin_notify(
        self, callback_id: str, deliveries: Sequence[Delivery], *, at: datetime, follow_up: bool = False
    ) -> NotifyStart | None:
        """See ``Store.begin_notify``: one transaction."""
        to_epoch_ms(at)
        rows = [q.delivery_row(d) for d in deliveries]
        step = partial(q.begin_notify, callback_id=callback_id, rows=rows, follow_up=follow_up)
        found = await self._db.write("begin notify", step)
        if found is None:
            return None
        before, after, inserted = found
        state = stored_state(before if after is None else after)
        return NotifyStart(stored_state(before), state, frozenset(inserted), follow_up, after is not None)

    async def resolve_contract(
        self, callback_id: str, deliveries: Sequence[Delivery], *, at: datetime
    ) -> Moved | None:
        """See ``Store.resolve_contract``: one transaction."""
        rows = [q.delivery_row(d) for d in deliveries]
        step = partial(q.resolve_contract, callback_id=callback_id, rows=rows, at_text=iso(utc_ms(at)))
        found = await self._db.write("resolve contract", step)
        return None if found is None else Moved(stored_state(found[0]), stored_state(found[1]))

    async def pause_contract(self, callback_id: str) -> Moved | None:
        """See ``Store.pause_contract``."""
        found = await self._db.write("pause contract", partial(q.pause_contract, callback_id=callback_id))
        return None if found is None else Moved(stored_state(found[0]), stored_state(found[1]))

    async def resume_contract(self, callback_id: str, *, deadline: datetime) -> Moved | None:
        """See ``Store.resume_contract``."""
        step = partial(q.resume_contract, callback_id=callback_id, deadline=iso(utc_ms(deadline)))
        found = await self._db.write("resume contract", step)
        return None if found is None else Moved(stored_state(found[0]), stored_state(found[1]))

    # -- hook sessions -----------------------------------------------------------------------

    async def append_transcript(
        self,
        session_key: str,
        entries: Sequence[dict[str, Any]],
        *,
        at: datetime,
        checkpoints: Mapping[str, dict[str, Any]] | None = None,
        usage: UsageCount | None = None,
    ) -> list[int]:
        """See ``Store.append_transcript`` (one transaction, the usage counters' rows with it)."""
        payloads = [codec.dumps(e, what="transcript entry") for e in entries]
        texts = [(k, codec.dumps(v, what=f"checkpoint of {k!r}")) for k, v in (checkpoints or {}).items()]
        counted = None if usage is None else _usage_step(usage.keys, usage.usage, at, usage.ttl_ms)
        if not payloads and not texts and counted is None:
            return []
        append = partial(
            q.append_transcript, session_key=session_key, payloads=payloads, at=at, checkpoints=texts
        )

        def tx(c: q.Conn) -> range:
            seqs = append(c)
            if counted is not None:
                counted(c)
            return seqs

        return list(await self._db.write("append transcript", tx))

    async def get_transcript(
        self, session_key: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[TranscriptEntry]:
        """See ``Store.get_transcript``."""
        sql_limit = -1 if limit is None else check_positive(limit)
        sql = """SELECT doc FROM transcripts WHERE session_key = ? AND seq > ?
            ORDER BY seq LIMIT ?"""
        args = (session_key, after_seq, sql_limit)
        return await self._records("get transcript", TranscriptEntry, sql, *args)

    async def put_checkpoint(self, session_key: str, data: dict[str, Any]) -> None:
        """See ``Store.put_checkpoint``."""
        text = codec.dumps(data, what=f"checkpoint of {session_key!r}")
        await self._exec("put checkpoint", q.PUT_CHECKPOINT, session_key, text)

    async def get_checkpoints(self, session_keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """See ``Store.get_checkpoints``."""
        sql = "SELECT session_key, data FROM checkpoints WHERE session_key IN"
        rows = await self._db.read("checkpoints", partial(q.select_in, sql=sql, ids=session_keys))
        return {key: codec.loads_dict(text, what="checkpoint") for key, text in rows}

    async def read_callback(
        self,
        callback_id: str,
        checkpoint_keys: Sequence[str],
        *,
        tail: TranscriptTail | None = None,
        envelope: bool = True,
    ) -> CallbackView:
        """See ``Store.read_callback``: two statements (four with ``tail``) in one hop to the
        worker thread, which runs this process's every statement, so none comes between them."""
        read = partial(
            q.read_callback, callback_id=callback_id, keys=checkpoint_keys, tail=tail, envelope=envelope
        )
        found, rows, docs = await self._db.read("read callback", read)
        return CallbackView(
            contract=None if found is None else codec.load_record(Contract, found[0]),
            envelope=None if found is None or found[1] is None else codec.load_envelope(found[1]),
            checkpoints={key: codec.loads_dict(text, what="checkpoint") for key, text in rows},
            transcript=None if docs is None else [codec.load_record(TranscriptEntry, doc) for (doc,) in docs],
        )

    # -- inbox -------------------------------------------------------------------------------

    async def create_inbox_item(self, item: InboxItem, deliveries: Sequence[Delivery] = ()) -> bool:
        """See ``Store.create_inbox_item``: one transaction."""
        codec.dump_record(item)  # refuse a non-JSON item here, not on the worker thread
        rows = [q.delivery_row(d) for d in deliveries]
        return await self._db.write("create inbox item", partial(q.create_inbox_item, item=item, rows=rows))

    async def get_inbox_item(self, item_id: str) -> InboxItem | None:
        """See ``Store.get_inbox_item``."""
        sql = "SELECT doc FROM inbox_items WHERE id = ?"
        return await self._record("get inbox item", InboxItem, sql, item_id)

    async def list_inbox(
        self,
        *,
        status: InboxStatus | None = None,
        kind: InboxKind | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[InboxItem]:
        """See ``Store.list_inbox``."""
        filters = {"status": status, "kind": kind}
        return await self._page("inbox_items", "id", filters, limit, cursor, InboxItem)

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
        allowed = frozenset(from_statuses)

        def tx(c: q.Conn) -> InboxItem | None:
            return q.transition_inbox_item(c, item_id, allowed, to_status, actor, note, at)

        return await self._db.write("transition inbox item", tx)

    async def inbox_history(self, item_id: str) -> list[InboxHistoryEntry]:
        """See ``Store.inbox_history``."""
        sql = "SELECT doc FROM inbox_history WHERE item_id = ? ORDER BY id"
        return await self._records("inbox history", InboxHistoryEntry, sql, item_id)

    # -- outbox ------------------------------------------------------------------------------

    async def enqueue_delivery(self, delivery: Delivery) -> bool:
        """See ``Store.enqueue_delivery``."""
        tx = partial(q.insert_delivery, row=q.delivery_row(delivery))
        return await self._db.write("enqueue delivery", tx)

    async def claim_deliveries(
        self, now: datetime, *, limit: int = 100, lease_ms: int = 30000
    ) -> list[Delivery]:
        """See ``Store.claim_deliveries``."""
        claim = partial(q.claim, table="deliveries", id_col="key")
        args = {
            "now_ms": to_epoch_ms(now),
            "limit": check_positive(limit),
            "lease_ms": check_positive(lease_ms, "lease_ms"),
        }
        rows = await self._db.write("claim due deliveries", partial(claim, **args))
        return [codec.load_record(Delivery, doc) for (doc,) in rows]

    async def list_deliveries(self, callback_id: str) -> list[Delivery]:
        """See ``Store.list_deliveries``."""
        sql = "SELECT doc FROM deliveries WHERE callback_id = ? ORDER BY created_ms, key"
        return await self._records("list deliveries", Delivery, sql, callback_id)

    async def record_outcomes(self, outcomes: Sequence[DeliveryOutcome]) -> Recorded:
        """See ``Store.record_outcomes``: one transaction, each record changed in place."""
        for o in outcomes:
            check_outcome(o)
        if not outcomes:
            return Recorded(frozenset())
        keys, moved = await self._db.write("record outcomes", partial(q.record_outcomes, outcomes=outcomes))
        return Recorded(frozenset(keys), {cid: stored_state(state) for cid, state in moved.items()})

    # -- model usage -------------------------------------------------------------------------

    async def add_usage(self, keys: Sequence[str], usage: Usage, *, at: datetime, ttl_ms: int) -> None:
        """See ``Store.add_usage`` (one transaction)."""
        step = _usage_step(keys, usage, at, ttl_ms)
        if step is not None:
            await self._db.write("add usage", step)

    async def get_usage(self, keys: Sequence[str]) -> dict[str, Usage]:
        """See ``Store.get_usage``."""
        sql = "SELECT key, input_tokens, output_tokens, cost_usd FROM usage WHERE key IN"
        rows = await self._db.read("usage", partial(q.select_in, sql=sql, ids=keys))
        return {key: Usage(int(i), int(o), float(usd)) for key, i, o, usd in rows}

    # -- pacing ------------------------------------------------------------------------------

    async def take_pace_slot(
        self, key: str, *, holder: str, limit: int, window_ms: int, at: datetime
    ) -> datetime | None:
        """See ``Store.take_pace_slot`` (one transaction)."""
        check_positive(limit, "limit")
        check_positive(window_ms, "window_ms")
        at_ms = to_epoch_ms(at)
        step = partial(
            pacing.take_pace_slot, key=key, holder=holder, limit=limit, window_ms=window_ms, at_ms=at_ms
        )
        free_ms = await self._db.write("take pace slot", step)
        return None if free_ms is None else from_ms(free_ms)

    # -- feedback ----------------------------------------------------------------------------

    async def put_feedback(self, feedback: Feedback) -> None:
        """See ``Store.put_feedback`` (one row per callback and person, replaced)."""
        row = (feedback.callback_id, feedback.person, to_epoch_ms(feedback.at), codec.dump_record(feedback))
        sql = "INSERT OR REPLACE INTO feedback (callback_id, person, at_ms, doc) VALUES (?, ?, ?, ?)"
        await self._exec("put feedback", sql, *row)

    async def get_feedback(self, callback_ids: Sequence[str]) -> dict[str, list[Feedback]]:
        """See ``Store.get_feedback``."""
        sql = "SELECT doc FROM feedback WHERE callback_id IN"
        rows = await self._db.read("feedback", partial(q.select_in, sql=sql, ids=callback_ids))
        return group_feedback(codec.load_record(Feedback, doc) for (doc,) in rows)

    # -- silences ----------------------------------------------------------------------------

    async def put_silence(self, silence: Silence) -> None:
        """See ``Store.put_silence``."""
        row = (
            silence.id,
            to_epoch_ms(silence.created_at),
            to_epoch_ms(silence.starts_at),
            to_epoch_ms(silence.ends_at),
            codec.dump_record(silence),
        )
        sql = (
            "INSERT OR REPLACE INTO silences (id, created_ms, starts_ms, ends_ms, doc) VALUES (?, ?, ?, ?, ?)"
        )
        await self._exec("put silence", sql, *row)

    async def get_silence(self, silence_id: str) -> Silence | None:
        """See ``Store.get_silence``."""
        return await self._record("get silence", Silence, "SELECT doc FROM silences WHERE id = ?", silence_id)

    async def list_silences(
        self,
        *,
        now: datetime,
        state: SilenceState | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[Silence]:
        """See ``Store.list_silences``."""
        after = None if cursor is None else decode_cursor(cursor)
        read = partial(q.silences_page, now_ms=to_epoch_ms(now), state=state, after=after)
        rows = await self._db.read("list silences", partial(read, fetch=check_positive(limit) + 1))
        return to_page(rows, limit, lambda doc: codec.load_record(Silence, doc))

    # -- retention ---------------------------------------------------------------------------

    async def prune(self, before: PruneBefore, *, limit: int = 500) -> Pruned:
        """See ``Store.prune``: one transaction per kind (``pruning``)."""
        check_positive(limit)
        done = Pruned()
        if before.callbacks is not None:
            args = (to_epoch_ms(before.callbacks), cutoff_text(before.callbacks), limit)
            step = partial(prune.prune_contracts, checkpoints=before.callback_checkpoints)
            done += await self._db.write("prune callbacks", lambda c: step(c, *args))
        if before.inbox is not None:
            args = (to_epoch_ms(before.inbox), cutoff_text(before.inbox), limit)
            done += await self._db.write("prune inbox", lambda c: prune.prune_inbox(c, *args))
        if before.sessions is not None:
            cutoff_ms = to_epoch_ms(before.sessions)
            step = partial(prune.prune_sessions, checkpoints=before.session_checkpoints)
            done += await self._db.write("prune sessions", lambda c: step(c, cutoff_ms, limit))
        if before.silences is not None:
            ended_ms = to_epoch_ms(before.silences)
            done += await self._db.write("prune silences", lambda c: prune.prune_silences(c, ended_ms, limit))
        return done


def _usage_step(
    keys: Sequence[str], usage: Usage, at: datetime, ttl_ms: int
) -> Callable[[q.Conn], None] | None:
    """``add_usage``'s statements for a transaction (None: no key to count into)."""
    check_positive(ttl_ms, "ttl_ms")
    if not keys:
        return None
    at_ms = to_epoch_ms(at)
    amounts = (usage.input_tokens, usage.output_tokens, usage.cost_usd)
    return partial(q.add_usage, keys=list(keys), amounts=amounts, at_ms=at_ms, expires_ms=at_ms + ttl_ms)
