"""``RedisStore``: the Store contract on a Redis server, shared by every replica.

Single-key operations are single commands; every step that changes more than one key is one
Lua script (``scripts``) or a MULTI/EXEC pipeline, so replicas racing on the same
contract, delivery or inbox item see each step whole. Deadlines and delivery schedules are
sorted sets scored by due time; listings use lexical indexes instead of ``KEYS``/``SCAN``.
Key layout: ``keys``; connection and error translation: ``connection``.

Past 500 lines, and one module, because it is one class: each method is a short call of a
command, a pipeline or a script, and what makes them long elsewhere already lives beside it
(the Lua in ``scripts``, keys in ``keys``, errors in ``connection``). Cut by record kind, the
rules that hold across kinds (a claim's due set, an index kept with its document) would be apart.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel
from redis.asyncio.client import Pipeline

from sentinel_hooks.clock import from_ms, iso
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.core.usage import Usage
from sentinel_hooks.errors import StoreError
from sentinel_hooks.store import codec
from sentinel_hooks.store.base import CallbackView, SharedState, TranscriptTail, UsageCount
from sentinel_hooks.store.feedback import Feedback, group_feedback
from sentinel_hooks.store.paging import (
    check_positive,
    decode_cursor,
    sort_member,
    split_member,
    to_page,
)
from sentinel_hooks.store.pruning import TRIM_PER_CONTRACT, PruneBefore, Pruned, cutoff_text
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
    SettledState,
    Settlement,
    TranscriptEntry,
    apply_outcome,
    as_deduped,
    as_member,
    check_acceptable,
    check_one_watcher,
    check_outcome,
    check_settlement,
    settle,
    stored_state,
    to_epoch_ms,
    transition,
    utc_ms,
)
from sentinel_hooks.store.redis import groups, retention
from sentinel_hooks.store.redis import scripts as lua
from sentinel_hooks.store.redis.audit import RedisAudit
from sentinel_hooks.store.redis.connection import RedisConnection, as_text
from sentinel_hooks.store.redis.keys import RedisKeys
from sentinel_hooks.store.silences import Silence, SilenceState
from sentinel_hooks.store.turns import TurnBatches
from sentinel_hooks.store.urls import redacted_url

R = TypeVar("R", bound=BaseModel)

_CAS_ATTEMPTS = 100
READ_SLICE = 5_000  # ids per HMGET, commands per pipeline of a bulk read (bounded buffers)
PRIORITIES_CHUNK = 500  # records per ``trigger_priorities`` script call (Redis busy a few ms at most)
_GLOB_SPECIAL = re.compile(r"[*?\[\]\\]")  # what a MATCH pattern reads as a wildcard unless escaped
_MAX_SEQ = 2**52  # an ``after_seq`` beyond any list's length (Lua numbers are exact up to 2**53)


class RedisStore(RedisAudit):
    """The Store contract on the Redis server at ``url``, keys under ``key_prefix``."""

    def __init__(self, url: str, *, key_prefix: str = "sentinel:") -> None:
        self.url = url
        self.keys = RedisKeys(key_prefix)
        self._db = RedisConnection(url)
        self._history_keep: int | None = None  # the ``keep`` of the latest batch written
        self._accept = TurnBatches[tuple[list[str], list[Any]], Any](self._accept_batch)
        self._get_docs = TurnBatches[str, Any](self._docs_batch)

    def __repr__(self) -> str:
        return f"RedisStore({redacted_url(self.url)!r}, key_prefix={self.keys.prefix!r})"

    @property
    def shared(self) -> SharedState:
        """This server and prefix: every replica on them shares this state (``Store.shared``)."""
        return SharedState(self.url, self.keys.prefix)

    async def open(self) -> None:
        """Connect, check the server answers, register the scripts."""
        await self._db.start()

    async def close(self) -> None:
        """Close the connection pool; idempotent."""
        await self._db.stop()

    async def ping(self) -> None:
        """INCR the ``health`` counter: a write, refused like any other when Redis takes none."""
        async with self._db.translated("ping (a write to the health key)"):
            await self._db.client.incr(self.keys.health)

    # -- watchers: runtime state and history -------------------------------------------------

    async def list_watcher_states(self, prefix: str = "") -> dict[str, dict[str, Any]]:
        """See ``Store.list_watcher_states`` (HGETALL; with a prefix, HSCAN matching it, so only
        those states cross the wire, ``READ_SLICE`` fields scanned per call)."""
        client = self._db.client
        async with self._db.translated("list watcher states"):
            if not prefix:
                found = await client.hgetall(self.keys.watcher_states)
            else:
                pattern = _GLOB_SPECIAL.sub(r"\\\g<0>", prefix) + "*"
                scan = client.hscan_iter(self.keys.watcher_states, pattern, READ_SLICE)
                found = {key: text async for key, text in scan}
        return {
            as_text(wid): codec.loads_dict(as_text(text), what="watcher state") for wid, text in found.items()
        }

    async def get_watcher_states(self, watcher_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """See ``Store.get_watcher_states`` (HMGET of ``READ_SLICE`` ids at a time, one pipeline)."""
        ids = list(watcher_ids)
        client = self._db.client
        async with self._db.translated("get watcher states"), client.pipeline(transaction=False) as pipe:
            for start in range(0, len(ids), READ_SLICE):
                pipe.hmget(self.keys.watcher_states, ids[start : start + READ_SLICE])
            texts = [text for part in await pipe.execute() for text in part]
        return {
            wid: codec.loads_dict(as_text(text), what="watcher state")
            for wid, text in zip(ids, texts, strict=True)
            if text is not None
        }

    async def last_observations(self, watcher_ids: Sequence[str]) -> dict[str, Observation]:
        """See ``Store.last_observations`` (LINDEX 0 of each history, ``READ_SLICE`` per pipeline)."""
        ids = list(watcher_ids)
        texts: list[Any] = []
        async with self._db.translated("last observations"):
            for start in range(0, len(ids), READ_SLICE):
                async with self._db.client.pipeline(transaction=False) as pipe:
                    for wid in ids[start : start + READ_SLICE]:
                        pipe.lindex(self.keys.observations(wid), 0)
                    texts.extend(await pipe.execute())
        return {
            wid: codec.load_record(Observation, as_text(text))
            for wid, text in zip(ids, texts, strict=True)
            if text is not None
        }

    async def observations(
        self, watcher_id: str, *, limit: int = 100, since: datetime | None = None
    ) -> list[Observation]:
        """See ``Store.observations`` (each write trims its history, so only a history written
        before a smaller ``keep`` holds more than ``keep``: it is read up to ``keep``)."""
        limit = check_positive(limit)
        since = None if since is None else utc_ms(since)
        window = self._history_keep  # the newest kept; then, without ``since``, ``limit`` of them
        if since is None:
            window = limit if window is None else min(limit, window)
        end = -1 if window is None else window - 1
        async with self._db.translated("observations"):
            texts = await self._db.client.lrange(self.keys.observations(watcher_id), 0, end)
        found = [codec.load_record(Observation, as_text(t)) for t in texts]
        return [o for o in found if since is None or o.at >= since][:limit]

    async def write_watcher_batch(
        self,
        observations: Sequence[tuple[str, Observation]],
        states: Mapping[str, dict[str, Any] | None],
        *,
        keep: int = 500,
    ) -> None:
        """See ``Store.write_watcher_batch``: one script run (atomic, as MULTI/EXEC would be)."""
        keep = self._history_keep = check_positive(keep, "keep")
        docs = [(wid, codec.dump_record(obs)) for wid, obs in observations]
        texts = [
            (wid, None if state is None else codec.dumps(state, what=f"state of {wid!r}"))
            for wid, state in states.items()
        ]
        if not docs and not texts:
            return
        keys, args = lua.write_watcher_batch_call(self.keys, docs, texts, keep)
        await self._db.run("write watcher batch", self._db.scripts.write_watcher_batch, keys, args)

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
        """See ``Store.accept_contract`` (one script)."""
        check_acceptable(contract, dedupe_key, dedupe_ttl_ms, checkpoints, deliveries, group)
        envelope_text = codec.dump_envelope(envelope)
        texts = [(k, codec.dumps(v, what=f"checkpoint of {k!r}")) for k, v in (checkpoints or {}).items()]
        dedupe = None if dedupe_key is None else (dedupe_key, dedupe_ttl_ms)
        keys, args = lua.accept_contract_call(
            self.keys, contract, envelope_text, dedupe, texts, deliveries, group
        )
        stored = await self._accept((keys, args))
        if not stored:
            return None
        state, group_id = as_text(stored[0]), as_text(stored[1])
        if state == "refused":
            raise NoOpenGroup(contract.callback_id)
        if group_id:
            return as_member(contract, group_id)
        return contract if state == contract.state else as_deduped(contract)

    async def _accept_batch(self, calls: list[tuple[list[str], list[Any]]]) -> list[Any]:
        """The accepts made in one turn of the event loop (a notification's fires) in one
        pipelined round trip of EVALSHA, each its own script (atomic alone); each one's reply or error."""
        script = self._db.scripts.accept_contract
        if len(calls) == 1:
            return [await self._db.run("accept contract", script, *calls[0])]
        return await self._db.run_pipelined("accept contract", script, calls)

    # -- groups (SPEC §19) -------------------------------------------------------------------

    async def claim_joins(self, now: datetime, *, limit: int = 100, lease_ms: int = 30000) -> list[JoinBatch]:
        """See ``GroupStore.claim_joins`` (one script)."""
        check_positive(limit, "limit")
        check_positive(lease_ms, "lease_ms")
        keys, args = groups.claim_joins_call(self.keys, to_epoch_ms(now), limit, lease_ms)
        rows = await self._db.run("claim joins", self._db.scripts.claim_joins, keys, args)
        return groups.batches([[as_text(v) for v in row] for row in rows])

    async def join_members(self, group: GroupRequest, members: Sequence[MemberJoin]) -> list[str | None]:
        """See ``GroupStore.join_members`` (one script)."""
        check_one_watcher(members)
        if not members:
            return []
        keys, args = groups.join_members_call(self.keys, group, members)
        answers = await self._db.run("join members", self._db.scripts.join_members, keys, args)
        return [as_text(answer) or None for answer in answers]

    async def joins_reported(self, batch: JoinBatch, deliveries: Sequence[Delivery], *, at: datetime) -> bool:
        """See ``GroupStore.joins_reported`` (one script)."""
        keys, args = groups.joins_reported_call(self.keys, batch, deliveries, to_epoch_ms(at))
        done = await self._db.run("record joins", self._db.scripts.joins_reported, keys, args)
        return bool(int(done))

    async def member_resolved(self, group_id: str, member_id: str) -> bool:
        """See ``GroupStore.member_resolved`` (one script)."""
        args = [self.keys.prefix, group_id, member_id]
        done = await self._db.run("member resolved", self._db.scripts.member_resolved, [], args)
        return bool(int(done))

    async def get_contract(self, callback_id: str) -> Contract | None:
        """See ``Store.get_contract``."""
        return await self._doc(Contract, self.keys.contract(callback_id))

    async def _doc(self, model: type[R], key: str) -> R | None:
        text = await self._get_docs(key)
        return None if text is None else codec.load_record(model, as_text(text))

    async def _docs_batch(self, keys: list[str]) -> list[Any]:
        """The ``doc`` of each key, read in one turn of the event loop (a notification's alerts
        looking up their fires): one pipelined round trip."""
        if len(keys) == 1:
            async with self._db.translated("get record"):
                return [await self._db.client.hget(keys[0], "doc")]
        return await self._hget_many("get records", keys, "doc")

    async def get_contracts(self, callback_ids: Sequence[str]) -> dict[str, Contract]:
        """See ``Store.get_contracts``."""
        ids = list(dict.fromkeys(callback_ids))
        texts = await self._hget_many("get contracts", [self.keys.contract(cid) for cid in ids], "doc")
        return {
            cid: codec.load_record(Contract, as_text(text))
            for cid, text in zip(ids, texts, strict=True)
            if text is not None
        }

    async def trigger_priorities(self, callback_ids: Sequence[str]) -> set[str]:
        """See ``Store.trigger_priorities``: read by Redis itself (``scripts.TRIGGER_PRIORITIES``),
        ``PRIORITIES_CHUNK`` records per call; a record its JSON decoder refuses is read here as
        plain JSON (a text that is not JSON is a ``StoreError``), and one without a priority adds
        none, as SQLite's ``json_extract`` reads them."""
        ids = list(dict.fromkeys(callback_ids))
        found: set[str] = set()
        for start in range(0, len(ids), PRIORITIES_CHUNK):
            chunk = ids[start : start + PRIORITIES_CHUNK]
            keys = [self.keys.contract(cid) for cid in chunk]
            reply = await self._db.run("trigger priorities", self._db.scripts.trigger_priorities, keys, [])
            end = reply.index(0)
            found.update(as_text(priority) for priority in reply[:end])
            found |= await self._priorities_read_here([chunk[int(index) - 1] for index in reply[end + 1 :]])
        return found

    async def _priorities_read_here(self, callback_ids: list[str]) -> set[str]:
        """``trigger_priorities`` of records Redis's decoder refused, each parsed as plain JSON."""
        keys = [self.keys.contract(cid) for cid in callback_ids]
        texts = await self._hget_many("trigger priorities", keys, "doc")
        found: set[str] = set()
        for cid, text in zip(callback_ids, texts, strict=True):
            if text is None:
                continue
            trigger = codec.loads_dict(as_text(text), what=f"contract {cid!r}").get("trigger")
            priority = trigger.get("priority") if isinstance(trigger, dict) else None
            if isinstance(priority, str):
                found.add(priority)
        return found

    async def get_envelopes(self, callback_ids: Sequence[str]) -> dict[str, Envelope]:
        """See ``Store.get_envelopes``."""
        ids = list(dict.fromkeys(callback_ids))
        texts = await self._hget_many("envelopes", [self.keys.contract(cid) for cid in ids], "envelope")
        return {
            cid: codec.load_envelope(as_text(text))
            for cid, text in zip(ids, texts, strict=True)
            if text is not None
        }

    async def _hget_many(self, what: str, keys: Sequence[str], field: str) -> list[str | None]:
        """HGET ``field`` of each key, in one pipelined round trip."""
        if not keys:
            return []
        async with self._db.translated(what), self._db.client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.hget(key, field)
            found: list[str | None] = await pipe.execute()
        return found

    async def list_contracts(
        self,
        *,
        watcher_id: str | None = None,
        state: ContractState | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[Contract]:
        """See ``Store.list_contracts``."""
        index = self.keys.contract_index(watcher_id, state)
        return await self._page(index, self.keys.contract_doc_prefix, limit, cursor, Contract)

    async def _page(
        self, index: str, doc_prefix: str, limit: int, cursor: str | None, model: type[R]
    ) -> Page[R]:
        bound = "" if cursor is None else sort_member(*decode_cursor(cursor))
        args = ["desc", bound, check_positive(limit) + 1, doc_prefix]
        flat = await self._db.run("list", self._db.scripts.range, [index], args)
        rows = [(*split_member(m), doc) for m, doc in zip(flat[::2], flat[1::2], strict=True)]
        return to_page(rows, limit, lambda doc: codec.load_record(model, doc))

    async def claim_due(
        self, now: datetime, *, limit: int = 100, lease_ms: int = 30000
    ) -> list[tuple[Contract, Envelope | None]]:
        """See ``Store.claim_due`` (one script)."""
        k = self.keys
        flat = await self._claim(k.contract_due, k.contract_doc_prefix, now, limit, lease_ms, "envelope")
        return [
            (codec.load_record(Contract, doc), codec.load_envelope(envelope) if envelope else None)
            for doc, envelope in zip(flat[::2], flat[1::2], strict=True)
        ]

    async def _claim(
        self, due: str, doc_prefix: str, now: datetime, limit: int, lease_ms: int, *fields: str
    ) -> list[str]:
        """The ``doc`` and then each of ``fields`` of every record claimed, flat."""
        now_ms = to_epoch_ms(now)
        lease_end = now_ms + check_positive(lease_ms, "lease_ms")
        args = [now_ms, check_positive(limit), lease_end, doc_prefix, "doc", *fields]
        found = await self._db.run("claim due", self._db.scripts.claim, [due], args)
        return [as_text(value) if value is not None else "" for value in found]

    async def settle_contracts(self, settlements: Sequence[Settlement], *, at: datetime) -> set[str]:
        """See ``Store.settle_contracts``.

        One script, after one pipelined read of the contracts the caller did not pass as
        ``claimed`` (their watcher and creation time name the indexes to move them between).
        The script re-checks each ``state``, leaving a contract alone if another settler won
        in between, and changes the stored record in place. A record not in the shape that
        needs is settled by a second script with a whole new doc.
        """
        for s in settlements:
            check_settlement(s)
        to_epoch_ms(at)
        unknown = list(dict.fromkeys(s.callback_id for s in settlements if s.claimed is None))
        read = await self._contracts("settle contracts", unknown)
        batch: list[tuple[Contract, SettledState, Sequence[Delivery]]] = []
        seen: set[str] = set()
        for s in settlements:
            contract = s.claimed or read.get(s.callback_id)
            if contract is None or s.callback_id in seen:
                continue
            seen.add(s.callback_id)
            if contract.state == "pending":
                batch.append((contract, s.state, s.deliveries))
        if not batch:
            return set()
        won, odd = await self._settle(lua.settle_contracts_call(self.keys, batch, at))
        if odd:
            current = await self._contracts("settle contracts", sorted(odd))
            retry = [(current[c.callback_id], st, ds) for c, st, ds in batch if c.callback_id in current]
            docs = {c.callback_id: codec.dump_record(settle(c, st, at=at)) for c, st, _ in retry}
            won |= (await self._settle(lua.settle_contracts_call(self.keys, retry, at, docs=docs)))[0]
        return won

    async def _contracts(self, what: str, callback_ids: Sequence[str]) -> dict[str, Contract]:
        """The contracts that exist among ``callback_ids`` (one pipelined read)."""
        docs = await self._hget_many(what, [self.keys.contract(cid) for cid in callback_ids], "doc")
        return {
            cid: codec.load_record(Contract, as_text(doc))
            for cid, doc in zip(callback_ids, docs, strict=True)
            if doc is not None
        }

    async def _settle(self, call: lua.Call) -> tuple[set[str], set[str]]:
        """Run SETTLE_CONTRACTS: (ids settled, ids whose record could not be changed in place)."""
        won, odd = await self._db.run("settle contracts", self._db.scripts.settle_contracts, *call)
        return {as_text(cid) for cid in won}, {as_text(cid) for cid in odd}

    async def begin_notify(
        self, callback_id: str, deliveries: Sequence[Delivery], *, at: datetime, follow_up: bool = False
    ) -> NotifyStart | None:
        """See ``Store.begin_notify`` (one script)."""
        to_epoch_ms(at)
        keys, args = lua.begin_notify_call(self.keys, callback_id, deliveries, follow_up=follow_up)
        found = await self._db.run("begin notify", self._db.scripts.begin_notify, keys, args)
        if not found:
            return None
        before, after, taken, *inserted = (as_text(value) for value in found)
        return NotifyStart(
            stored_state(before), stored_state(after), frozenset(inserted), follow_up, taken == "1"
        )

    async def resolve_contract(
        self, callback_id: str, deliveries: Sequence[Delivery], *, at: datetime
    ) -> Moved | None:
        """See ``Store.resolve_contract`` (one script)."""
        keys, args = lua.resolve_contract_call(self.keys, callback_id, deliveries, at)
        found = await self._db.run("resolve contract", self._db.scripts.resolve_contract, keys, args)
        if not found:
            return None
        before, after = (as_text(value) for value in found)
        return Moved(stored_state(before), stored_state(after))

    async def pause_contract(self, callback_id: str) -> Moved | None:
        """See ``Store.pause_contract`` (one script)."""
        return await self._step("pause contract", [self.keys.prefix, callback_id, "pause"])

    async def resume_contract(self, callback_id: str, *, deadline: datetime) -> Moved | None:
        """See ``Store.resume_contract`` (one script)."""
        args = [self.keys.prefix, callback_id, "resume", iso(utc_ms(deadline))]
        return await self._step("resume contract", args)

    async def _step(self, what: str, args: list[str]) -> Moved | None:
        found = await self._db.run(what, self._db.scripts.contract_step, [], args)
        if not found:
            return None
        before, after = (as_text(value) for value in found)
        return Moved(stored_state(before), stored_state(after))

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
        """See ``Store.append_transcript``.

        One script: the checkpoints are SET, RPUSH adds the entries; their seqs follow the
        list's pruned head (``retention``), and the session's last append moves to ``at``.
        With ``usage``, the script and ``add_usage``'s commands are one MULTI/EXEC.
        """
        texts = _transcript_texts(entries, at)
        saved = [(k, codec.dumps(v, what=f"checkpoint of {k!r}")) for k, v in (checkpoints or {}).items()]
        if usage is not None:
            check_positive(usage.ttl_ms, "ttl_ms")
            if not usage.keys:
                usage = None
        if not texts and not saved:
            if usage is not None:
                await self.add_usage(usage.keys, usage.usage, at=at, ttl_ms=usage.ttl_ms)
            return []
        k = self.keys
        keys = [k.transcript(session_key), k.transcript_head(session_key), k.sessions]
        keys += [k.checkpoint(key) for key, _ in saved]
        args: list[str | int] = [session_key, to_epoch_ms(at), len(texts), *texts, *(t for _, t in saved)]
        script = self._db.scripts.append_transcript
        if usage is None:
            last = await self._db.run("append transcript", script, keys, args)
        else:
            client = self._db.client
            async with self._db.translated("append transcript"), client.pipeline(transaction=True) as pipe:
                await script(keys=keys, args=args, client=pipe)
                self._count(pipe, usage.keys, usage.usage, usage.ttl_ms)
                last, *_ = await pipe.execute()
        return list(range(int(last) - len(texts) + 1, int(last) + 1))

    async def get_transcript(
        self, session_key: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[TranscriptEntry]:
        """See ``Store.get_transcript`` (one script: the head and the entries after it)."""
        count = -1 if limit is None else check_positive(limit)
        keys = [self.keys.transcript(session_key), self.keys.transcript_head(session_key)]
        args = [min(max(after_seq, 0), _MAX_SEQ), count]
        first, *texts = await self._db.run("get transcript", self._db.scripts.read_transcript, keys, args)
        return [_transcript_entry(int(first) + i, as_text(t)) for i, t in enumerate(texts)]

    async def put_checkpoint(self, session_key: str, data: dict[str, Any]) -> None:
        """See ``Store.put_checkpoint``."""
        text = codec.dumps(data, what=f"checkpoint of {session_key!r}")
        async with self._db.translated("put checkpoint"):
            await self._db.client.set(self.keys.checkpoint(session_key), text)

    async def get_checkpoints(self, session_keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """See ``Store.get_checkpoints``."""
        keys = list(dict.fromkeys(session_keys))
        if not keys:
            return {}
        async with self._db.translated("checkpoints"):
            texts = await self._db.client.mget([self.keys.checkpoint(key) for key in keys])
        return {
            key: codec.loads_dict(as_text(text), what="checkpoint")
            for key, text in zip(keys, texts, strict=True)
            if text is not None
        }

    async def read_callback(
        self,
        callback_id: str,
        checkpoint_keys: Sequence[str],
        *,
        tail: TranscriptTail | None = None,
        envelope: bool = True,
    ) -> CallbackView:
        """See ``Store.read_callback``: without ``tail``, HMGET of the contract's hash and MGET
        of the checkpoints, pipelined; with it, one script (``retention.READ_CALLBACK``) that
        also reads the transcript after the place the checkpoint holds."""
        keys = list(dict.fromkeys(checkpoint_keys))
        fields = ["doc", "envelope" if envelope else ""]  # no hash has a field '': HMGET answers nil
        transcript: list[TranscriptEntry] | None = None
        if tail is None:
            async with (
                self._db.translated("read callback"),
                self._db.client.pipeline(transaction=False) as pipe,
            ):
                pipe.hmget(self.keys.contract(callback_id), fields)
                if keys:
                    pipe.mget([self.keys.checkpoint(key) for key in keys])
                found = await pipe.execute()
            (doc, text), texts = found[0], (found[1] if keys else [])
        else:
            k = self.keys
            script_keys = [k.contract(callback_id), k.transcript(tail.session_key)]
            script_keys += [k.transcript_head(tail.session_key), k.checkpoint(tail.checkpoint_key)]
            script_keys += [k.checkpoint(key) for key in keys]
            read = self._db.scripts.read_callback
            (doc, text), texts, first, entries = await self._db.run(
                "read callback", read, script_keys, [tail.field, fields[1]]
            )
            transcript = [_transcript_entry(int(first) + i, as_text(t)) for i, t in enumerate(entries)]
        return CallbackView(
            contract=None if doc is None else codec.load_record(Contract, as_text(doc)),
            envelope=None if text is None else codec.load_envelope(as_text(text)),
            checkpoints={
                key: codec.loads_dict(as_text(text), what="checkpoint")
                for key, text in zip(keys, texts, strict=True)
                if text is not None
            },
            transcript=transcript,
        )

    # -- inbox -------------------------------------------------------------------------------

    async def create_inbox_item(self, item: InboxItem, deliveries: Sequence[Delivery] = ()) -> bool:
        """See ``Store.create_inbox_item``: one script."""
        keys, args = lua.create_inbox_item_call(self.keys, item, deliveries)
        return bool(await self._db.run("create inbox item", self._db.scripts.create_inbox_item, keys, args))

    async def get_inbox_item(self, item_id: str) -> InboxItem | None:
        """See ``Store.get_inbox_item``."""
        return await self._doc(InboxItem, self.keys.inbox_item(item_id))

    async def list_inbox(
        self,
        *,
        status: InboxStatus | None = None,
        kind: InboxKind | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[InboxItem]:
        """See ``Store.list_inbox``."""
        index = self.keys.inbox_index(status, kind)
        return await self._page(index, self.keys.inbox_doc_prefix, limit, cursor, InboxItem)

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
        """See ``Store.transition_inbox_item`` (optimistic: re-read when another writer won)."""
        k = self.keys
        for _ in range(_CAS_ATTEMPTS):
            async with self._db.translated("transition inbox item"):
                doc, version = await self._db.client.hmget(k.inbox_item(item_id), ["doc", "version"])
            if doc is None or version is None:
                return None
            item = codec.load_record(InboxItem, as_text(doc))
            if item.status not in from_statuses:
                return None
            moved, entry = transition(item, to_status=to_status, actor=actor, note=note, at=at)
            keys, args = lua.transition_inbox_item_call(k, item, as_text(version), moved, entry)
            script = self._db.scripts.transition_inbox_item
            if await self._db.run("transition inbox item", script, keys, args):
                return moved
        raise StoreError(
            f"{self._db.name}: inbox item {item_id!r} kept changing during {_CAS_ATTEMPTS} "
            "attempts to update it; try again"
        )

    async def inbox_history(self, item_id: str) -> list[InboxHistoryEntry]:
        """See ``Store.inbox_history``."""
        async with self._db.translated("inbox history"):
            texts = await self._db.client.lrange(self.keys.inbox_history(item_id), 0, -1)
        return [codec.load_record(InboxHistoryEntry, as_text(t)) for t in texts]

    # -- outbox ------------------------------------------------------------------------------

    async def enqueue_delivery(self, delivery: Delivery) -> bool:
        """See ``Store.enqueue_delivery``."""
        keys, args = lua.enqueue_delivery_call(self.keys, delivery)
        return bool(await self._db.run("enqueue delivery", self._db.scripts.enqueue_delivery, keys, args))

    async def claim_deliveries(
        self, now: datetime, *, limit: int = 100, lease_ms: int = 30000
    ) -> list[Delivery]:
        """See ``Store.claim_deliveries``."""
        k = self.keys
        docs = await self._claim(k.delivery_due, k.delivery_doc_prefix, now, limit, lease_ms)
        return [codec.load_record(Delivery, doc) for doc in docs]

    async def list_deliveries(self, callback_id: str) -> list[Delivery]:
        """See ``Store.list_deliveries``."""
        index = self.keys.delivery_index(callback_id)
        args = ["asc", "", -1, self.keys.delivery_doc_prefix]
        flat = await self._db.run("list deliveries", self._db.scripts.range, [index], args)
        return [codec.load_record(Delivery, as_text(doc)) for doc in flat[1::2]]

    async def record_outcomes(self, outcomes: Sequence[DeliveryOutcome]) -> Recorded:
        """See ``Store.record_outcomes``.

        Outcomes that carry their ``claimed`` delivery are written by one script that changes
        only the attempt's fields of each stored record (RECORD_OUTCOMES); a key with an outcome
        lacking that copy, or whose record is not in the shape the script needs, is read and
        rewritten whole (``_rewrite_deliveries``), with its outcomes in their order.
        """
        for o in outcomes:
            check_outcome(o)
        rewrite = {o.key for o in outcomes if o.claimed is None}
        patch = [(o.claimed, o) for o in outcomes if o.claimed is not None and o.key not in rewrite]
        done: set[str] = set()
        moved: dict[str, ContractState] = {}
        if patch:
            call = lua.record_outcomes_call(self.keys, patch)
            written, odd, flat = await self._db.run(
                "record outcomes", self._db.scripts.record_outcomes, *call
            )
            done = {as_text(key) for key in written}
            rewrite |= {as_text(key) for key in odd}
            moved = _moved(flat)
        rest = [o for o in outcomes if o.key in rewrite]
        if rest:
            rewritten, more = await self._rewrite_deliveries(rest)
            done |= {d.key for d in rewritten}
            moved.update(more)
        return Recorded(frozenset(done), moved)

    async def _rewrite_deliveries(
        self, outcomes: Sequence[DeliveryOutcome]
    ) -> tuple[list[Delivery], dict[str, ContractState]]:
        """Read the deliveries, apply the outcomes in order, write the new docs whole.

        Only state, attempts, schedule, error and ``updated_at`` change, and they are all
        overwritten, so building the new docs from a plain read is safe (last writer wins).
        """
        keys = list(dict.fromkeys(o.key for o in outcomes))
        docs = await self._hget_many("update deliveries", [self.keys.delivery(key) for key in keys], "doc")
        current = {
            key: codec.load_record(Delivery, as_text(doc))
            for key, doc in zip(keys, docs, strict=True)
            if doc is not None
        }
        updated: list[Delivery] = []
        for outcome in outcomes:
            delivery = current.get(outcome.key)
            if delivery is not None:
                current[outcome.key] = delivery = apply_outcome(delivery, outcome)
                updated.append(delivery)
        if not updated:
            return [], {}
        keys_args = lua.update_deliveries_call(self.keys, updated)
        done, moved = await self._db.run("update deliveries", self._db.scripts.update_deliveries, *keys_args)
        written = {as_text(key) for key in done}
        return [d for d in updated if d.key in written], _moved(moved)

    # -- model usage -------------------------------------------------------------------------

    async def add_usage(self, keys: Sequence[str], usage: Usage, *, at: datetime, ttl_ms: int) -> None:
        """See ``Store.add_usage`` (one MULTI/EXEC: HINCRBY, HINCRBYFLOAT and PEXPIRE per key)."""
        check_positive(ttl_ms, "ttl_ms")
        if not keys:
            return
        client = self._db.client
        async with self._db.translated("add usage"), client.pipeline(transaction=True) as pipe:
            self._count(pipe, keys, usage, ttl_ms)
            await pipe.execute()

    def _count(self, pipe: Pipeline, keys: Sequence[str], usage: Usage, ttl_ms: int) -> None:
        """Queue ``add_usage``'s commands on ``pipe`` (a MULTI/EXEC)."""
        for key in keys:
            name = self.keys.usage(key)
            pipe.hincrby(name, "in", usage.input_tokens)
            pipe.hincrby(name, "out", usage.output_tokens)
            pipe.hincrbyfloat(name, "usd", usage.cost_usd)
            pipe.pexpire(name, ttl_ms)

    async def get_usage(self, keys: Sequence[str]) -> dict[str, Usage]:
        """See ``Store.get_usage`` (HMGET per key, one pipeline)."""
        unique = list(dict.fromkeys(keys))
        client = self._db.client
        async with self._db.translated("usage"), client.pipeline(transaction=False) as pipe:
            for key in unique:
                pipe.hmget(self.keys.usage(key), ["in", "out", "usd"])
            rows = await pipe.execute()
        return {
            key: Usage(int(row[0] or 0), int(row[1] or 0), float(row[2] or 0))
            for key, row in zip(unique, rows, strict=True)
            if row[0] is not None
        }

    # -- pacing ------------------------------------------------------------------------------

    async def take_pace_slot(
        self, key: str, *, holder: str, limit: int, window_ms: int, at: datetime
    ) -> datetime | None:
        """See ``Store.take_pace_slot`` (one script on the key's sorted set)."""
        check_positive(limit, "limit")
        check_positive(window_ms, "window_ms")
        args = [to_epoch_ms(at), window_ms, limit, holder, uuid.uuid4().hex]
        script = self._db.scripts.take_pace_slot
        free_ms = await self._db.run("take pace slot", script, [self.keys.pace(key)], args)
        return None if free_ms is None else from_ms(int(free_ms))

    # -- feedback ----------------------------------------------------------------------------

    async def put_feedback(self, feedback: Feedback) -> None:
        """See ``Store.put_feedback`` (one HSET: the person's field replaced)."""
        doc = codec.dump_record(feedback)
        async with self._db.translated("put feedback"):
            await self._db.client.hset(self.keys.feedback(feedback.callback_id), feedback.person, doc)

    async def get_feedback(self, callback_ids: Sequence[str]) -> dict[str, list[Feedback]]:
        """See ``Store.get_feedback`` (HVALS per callback, one pipeline)."""
        unique = list(dict.fromkeys(callback_ids))
        client = self._db.client
        async with self._db.translated("feedback"), client.pipeline(transaction=False) as pipe:
            for callback_id in unique:
                pipe.hvals(self.keys.feedback(callback_id))
            rows = await pipe.execute()
        docs = (codec.load_record(Feedback, as_text(doc)) for row in rows for doc in row)
        return group_feedback(docs)

    # -- silences ----------------------------------------------------------------------------

    async def put_silence(self, silence: Silence) -> None:
        """See ``Store.put_silence`` (one MULTI/EXEC: the record and its end in the pruning index)."""
        doc = codec.dump_record(silence)
        k = self.keys
        async with (
            self._db.translated("put silence"),
            self._db.client.pipeline(transaction=True) as pipe,
        ):
            pipe.hset(k.silences, silence.id, doc)
            pipe.zadd(k.silence_ends, {silence.id: to_epoch_ms(silence.ends_at)})
            await pipe.execute()

    async def get_silence(self, silence_id: str) -> Silence | None:
        """See ``Store.get_silence``."""
        async with self._db.translated("get silence"):
            text = await self._db.client.hget(self.keys.silences, silence_id)
        return None if text is None else codec.load_record(Silence, as_text(text))

    async def list_silences(
        self,
        *,
        now: datetime,
        state: SilenceState | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[Silence]:
        """See ``Store.list_silences``: one HGETALL, filtered and ordered here.

        Silences are few (people make them by hand, and those ended longer ago than
        ``retention.callbacksDays`` are pruned), so reading them all is cheaper than keeping an
        index per state whose membership changes with the clock.
        """
        after = None if cursor is None else decode_cursor(cursor)
        check_positive(limit)
        async with self._db.translated("list silences"):
            found = await self._db.client.hgetall(self.keys.silences)
        rows: list[tuple[int, str, str]] = []
        for text in found.values():
            silence = codec.load_record(Silence, as_text(text))
            key = (to_epoch_ms(silence.created_at), silence.id)
            if (state is None or silence.state_at(now) == state) and (after is None or key < after):
                rows.append((*key, as_text(text)))
        rows.sort(reverse=True)
        return to_page(rows[: limit + 1], limit, lambda doc: codec.load_record(Silence, doc))

    async def _prune_silences(self, ended_before: datetime, limit: int) -> Pruned:
        """Delete up to ``limit`` silences that ended before ``ended_before``; HDEL counts each once
        however many replicas race."""
        k = self.keys
        async with self._db.translated("prune silences"):
            ids = await self._db.client.zrangebyscore(
                k.silence_ends, "-inf", f"({to_epoch_ms(ended_before)}", start=0, num=limit
            )
            if not ids:
                return Pruned()
            async with self._db.client.pipeline(transaction=True) as pipe:
                pipe.hdel(k.silences, *ids)
                pipe.zrem(k.silence_ends, *ids)
                deleted, _ = await pipe.execute()
        return Pruned(silences=int(deleted), more=len(ids) == limit)

    # -- retention ---------------------------------------------------------------------------

    async def prune(self, before: PruneBefore, *, limit: int = 500) -> Pruned:
        """See ``Store.prune``: one script per kind (``retention``)."""
        check_positive(limit)
        k, scripts, done = self.keys, self._db.scripts, Pruned()
        if before.callbacks is not None:
            bound = sort_member(to_epoch_ms(before.callbacks), "")[:-1]
            cap = TRIM_PER_CONTRACT * limit
            args = [k.prefix, bound, cutoff_text(before.callbacks), limit]
            args += [retention.json_list(before.callback_checkpoints), cap]
            contracts, deliveries, entries = await self._db.run(
                "prune callbacks", scripts.prune_contracts, [], args
            )
            more = contracts == limit or entries == cap
            done += Pruned(contracts=contracts, deliveries=deliveries, transcript_entries=entries, more=more)
        if before.inbox is not None:
            bound = sort_member(to_epoch_ms(before.inbox), "")[:-1]
            args = [k.prefix, bound, cutoff_text(before.inbox), limit]
            items, deliveries = await self._db.run("prune inbox", scripts.prune_inbox, [], args)
            done += Pruned(inbox_items=items, deliveries=deliveries, more=items == limit)
        if before.sessions is not None:
            args = [k.prefix, to_epoch_ms(before.sessions), limit]
            args.append(retention.json_list(before.session_checkpoints))
            sessions, entries, looked = await self._db.run(
                "prune sessions", scripts.prune_sessions, [k.sessions], args
            )
            done += Pruned(sessions=sessions, transcript_entries=entries, more=looked == limit)
        if before.silences is not None:
            done += await self._prune_silences(before.silences, limit)
        return done


def _moved(flat: Sequence[Any]) -> dict[str, ContractState]:
    """``{callback id: state}`` from a script's flat ``[id, state, id, state, …]`` answer."""
    texts = [as_text(value) for value in flat]
    return {cid: stored_state(state) for cid, state in zip(texts[::2], texts[1::2], strict=True)}


def _transcript_texts(entries: Sequence[dict[str, Any]], at: datetime) -> list[str]:
    at_text = iso(utc_ms(at))
    return [codec.dumps({"at": at_text, "entry": e}, what="transcript entry") for e in entries]


def _transcript_entry(seq: int, text: str) -> TranscriptEntry:
    stored = codec.loads_dict(text, what="transcript entry")
    return codec.validate_record(TranscriptEntry, {"seq": seq, **stored})
