"""The SQLite store's multi-statement operations, as plain functions of a connection.

Each function here runs on the worker thread inside one ``BEGIN IMMEDIATE`` transaction
(``SqliteWorker.write``), which is what makes the whole step atomic: a claim marks exactly the
rows it read, a settle writes the contract and its outbox rows together or not at all. They do
no I/O beyond the connection and never read the clock. Tables: ``schema``. One module, past
500 lines, because the steps share their row helpers and each is read beside the Lua script
that does the same step on Redis (``store/redis/scripts.py``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any

from sentinel_hooks.clock import iso
from sentinel_hooks.core.contract_states import (
    ContractState,
    after_approval_decided,
    after_approval_requested,
    after_notify,
    after_notify_delivered,
    after_notify_failed,
    after_resolved,
    is_notify_kind,
    kind_of_key,
)
from sentinel_hooks.store import codec
from sentinel_hooks.store.base import TranscriptTail
from sentinel_hooks.store.records import (
    Contract,
    Delivery,
    DeliveryOutcome,
    GroupRequest,
    InboxItem,
    InboxStatus,
    MemberJoin,
    first_history_entry,
    stored_state,
    to_epoch_ms,
    transition,
    utc_ms,
)
from sentinel_hooks.store.sqlite import groups
from sentinel_hooks.store.sqlite.worker import savepoint

Conn = sqlite3.Connection
DeliveryRow = tuple[str, str, str, int, int | None, str]

_INSERT_DELIVERY = """INSERT OR IGNORE INTO deliveries
    (key, callback_id, state, created_ms, due_ms, doc) VALUES (?, ?, ?, ?, ?, ?)"""


def rowcount(c: Conn, sql: str, args: Sequence[Any]) -> int:
    """Run one statement; the number of rows it changed."""
    return c.execute(sql, args).rowcount


def page(
    c: Conn,
    table: str,
    id_col: str,
    filters: Mapping[str, str | None],
    after: tuple[int, str] | None,
    fetch: int,
) -> list[tuple[int, str, str]]:
    """Up to ``fetch`` ``(created_ms, id, doc)`` rows, newest first, strictly after ``after``."""
    where = [f"{col} = ?" for col, value in filters.items() if value is not None]
    args: list[Any] = [value for value in filters.values() if value is not None]
    if after is not None:
        where.append(f"(created_ms, {id_col}) < (?, ?)")
        args.extend(after)
    sql = (
        f"SELECT created_ms, {id_col}, doc FROM {table} WHERE {' AND '.join(where) or '1'}"
        f" ORDER BY created_ms DESC, {id_col} DESC LIMIT ?"
    )
    return [(int(ms), str(i), str(doc)) for ms, i, doc in c.execute(sql, (*args, fetch))]


def claim(
    c: Conn, table: str, id_col: str, now_ms: int, limit: int, lease_ms: int, columns: str = "doc"
) -> list[tuple[Any, ...]]:
    """``columns`` of up to ``limit`` rows due at ``now_ms`` (by due time), now leased until
    ``now_ms + lease_ms``: hidden from other claimers until then."""
    rows = c.execute(
        f"""SELECT {id_col}, {columns} FROM {table} WHERE due_ms IS NOT NULL AND due_ms <= ?
            ORDER BY due_ms, {id_col} LIMIT ?""",
        (now_ms, limit),
    ).fetchall()
    c.executemany(
        f"UPDATE {table} SET due_ms = ? WHERE {id_col} = ?",
        [(now_ms + lease_ms, row[0]) for row in rows],
    )
    return [row[1:] for row in rows]


_SETTLE = """UPDATE contracts SET state = ?, due_ms = NULL,
    doc = json_set(doc, '$.state', ?, '$.settledAt', ?) WHERE callback_id = ? AND state = 'pending'"""


def settle_contracts(
    c: Conn, settlements: Sequence[tuple[str, str, Sequence[DeliveryRow]]], at_text: str
) -> set[str]:
    """For each ``(callback_id, state, outbox rows)``: pending → ``state`` (settled at
    ``at_text``, an ISO instant) plus its outbox rows, or nothing for a contract that is not
    pending. The record is changed in place (``json_set``), not loaded and dumped again.
    The callback ids that were settled."""
    won: set[str] = set()
    for callback_id, state, outbox in settlements:
        if c.execute(_SETTLE, (state, state, at_text, callback_id)).rowcount != 1:
            continue
        c.executemany(_INSERT_DELIVERY, outbox)
        won.add(callback_id)
    return won


IN_CHUNK = 500  # ids per ``IN (…)`` list, well below SQLite's limit on bound parameters


def select_in(c: Conn, sql: str, ids: Sequence[str]) -> list[tuple[Any, ...]]:
    """Rows of ``{sql} (?, …)`` over ``ids``, asked in chunks of ``IN_CHUNK``."""
    rows: list[tuple[Any, ...]] = []
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), IN_CHUNK):
        chunk = unique[start : start + IN_CHUNK]
        rows += c.execute(f"{sql} ({','.join('?' * len(chunk))})", chunk).fetchall()
    return rows


def read_callback(
    c: Conn, callback_id: str, keys: Sequence[str], tail: TranscriptTail | None, *, envelope: bool = True
) -> tuple[tuple[str, str | None] | None, list[tuple[Any, ...]], list[tuple[Any, ...]] | None]:
    """The contract's ``(doc, envelope)`` row (None when unknown; its envelope None unless
    ``envelope``), the ``(key, data)`` rows of the checkpoints of ``keys`` that exist, and the
    ``(doc,)`` rows of the transcript entries ``tail`` names (None without one)."""
    columns = "doc, envelope" if envelope else "doc, NULL"
    found = c.execute(f"SELECT {columns} FROM contracts WHERE callback_id = ?", (callback_id,)).fetchone()
    sql = "SELECT session_key, data FROM checkpoints WHERE session_key IN"
    rows = select_in(c, sql, keys)
    docs = None
    if tail is not None:
        path = f"$.{tail.field}"
        place = c.execute(
            "SELECT json_extract(data, ?), json_type(data, ?) FROM checkpoints WHERE session_key = ?",
            (path, path, tail.checkpoint_key),
        ).fetchone()
        after = 0  # a whole number there (as Lua's cjson reads it in the Redis store), else 0
        if place is not None and place[1] in ("integer", "real") and float(place[0]).is_integer():
            after = int(place[0])
        docs = c.execute(
            "SELECT doc FROM transcripts WHERE session_key = ? AND seq > ? ORDER BY seq",
            (tail.session_key, after),
        ).fetchall()
    row = None if found is None else (str(found[0]), None if found[1] is None else str(found[1]))
    return row, rows, docs


ContractRow = tuple[str, str, str, int, int | None, str, str]


def contract_row(contract: Contract, envelope_text: str) -> ContractRow:
    """The ``contracts`` row of ``contract`` (in the deadline index only while pending)."""
    due_ms = to_epoch_ms(contract.deadline) if contract.state == "pending" else None
    return (
        contract.callback_id,
        contract.watcher_id,
        contract.state,
        to_epoch_ms(contract.created_at),
        due_ms,
        codec.dump_record(contract),
        envelope_text,
    )


REFUSED = "refused"
"""``accept_contract``'s state for a ``join_only`` fire that found no open group (nothing written)."""

_INSERT_CONTRACT = """INSERT OR IGNORE INTO contracts
    (callback_id, watcher_id, state, created_ms, due_ms, doc, envelope) VALUES (?, ?, ?, ?, ?, ?, ?)"""


def accept_contract(
    c: Conn,
    fire: tuple[str, int],
    pending: Callable[[], ContractRow],
    deduped: Callable[[], ContractRow],
    dedupe: tuple[str, int, int] | None,
    checkpoints: Sequence[tuple[str, str]],
    deliveries: Sequence[DeliveryRow] = (),
    group: tuple[GroupRequest, Callable[[str], ContractRow]] | None = None,
    joins: groups.BatchJoins | None = None,
) -> tuple[str, str | None] | None:
    """Dedupe check, grouping, contract, checkpoints and deliveries of a new callback; the state
    stored and the group a ``grouped`` fire joined, or None (nothing written) when the callback id
    exists. ``fire`` is the callback id and its creation in epoch ms; ``pending`` makes the row
    stored when the fire neither joins a group nor is deduped (built only then: a storm's joins
    never need it). A silenced contract comes with no dedupe key, checkpoints or deliveries, and
    is stored as it is. ``dedupe`` is ``(key, now_ms, ttl_ms)``; ``deduped`` makes the row stored
    when the key is live (built only then). ``group`` is the fire's group and the row of a member of a group
    (by its id); after the dedupe check the fire joins the open group of its key (stored
    ``grouped``, with no checkpoints or deliveries) or opens one (SPEC §19); with ``joins``, the
    group counts and lists the member when the batch ends (``accept_contracts``). A ``join_only``
    request with no open group is answered ``(REFUSED, None)`` before any write."""
    callback_id, now_ms = fire
    if group is not None and group[0].join_only and dedupe is None:  # a storm's join: its own path
        return _join_only(c, callback_id, now_ms, group, joins)
    if c.execute("SELECT 1 FROM contracts WHERE callback_id = ?", (callback_id,)).fetchone():
        return None
    open_id = None
    if group is not None and group[0].join_only:  # before the dedupe key: refused, nothing written
        open_id = groups.open_group(c, group[0].key, now_ms, joins)
        if open_id is None:
            return REFUSED, None
    fresh = dedupe is None or _add_dedupe(c, *dedupe)
    if not fresh:
        c.execute(_INSERT_CONTRACT, deduped())
        return "deduped", None
    if group is not None:
        request, member = group
        group_id = open_id or groups.open_group(c, request.key, now_ms, joins)
        if group_id is not None:
            c.execute(_INSERT_CONTRACT, member(group_id))
            groups.join_group(c, group_id, callback_id, now_ms, joins)
            return "grouped", group_id
        groups.start_group(c, callback_id, request.key, now_ms, request.interval_ms, request.max_fires)
    row = pending()
    c.execute(_INSERT_CONTRACT, row)
    c.executemany("INSERT OR REPLACE INTO checkpoints (session_key, data) VALUES (?, ?)", checkpoints)
    for delivery in deliveries:
        insert_delivery(c, delivery)
    return str(row[2]), None


def _join_only(
    c: Conn,
    callback_id: str,
    now_ms: int,
    group: tuple[GroupRequest, Callable[[str], ContractRow]],
    joins: groups.BatchJoins | None,
) -> tuple[str, str | None] | None:
    """``accept_contract`` of a ``join_only`` fire with no dedupe key, in three statements: the
    open group, the member inserted unless its id exists (then None, nothing written: the group is
    only read), the group counting it."""
    request, member = group
    group_id = groups.open_group(c, request.key, now_ms, joins)
    if group_id is None:
        return REFUSED, None
    if c.execute(_INSERT_CONTRACT, member(group_id)).rowcount != 1:
        return None
    groups.join_group(c, group_id, callback_id, now_ms, joins)
    return "grouped", group_id


def join_members(c: Conn, request: GroupRequest, members: Sequence[MemberJoin]) -> list[str | None]:
    """``GroupStore.join_members`` inside the caller's transaction: the open group of the key read
    once, then each member in order as a join-only fire would be taken (``groups.takes``: the
    group still open, neither quiet nor full), its row inserted unless its id exists (then None)
    and counted; the rows written in one statement and the joins counted once at the end
    (``groups.count_joins``). A member the group no longer takes closes it and ends the answers:
    no later member would be taken either."""
    found = groups.open_row(c, request.key)
    if found is None:
        return []
    group_id, last_ms, interval_ms, fires, max_fires = found
    taken = {
        row[0]
        for row in select_in(
            c,
            "SELECT callback_id FROM contracts WHERE callback_id IN",
            [member.callback_id for member in members],
        )
    }
    joins = groups.BatchJoins()
    answers: list[str | None] = []
    rows: list[ContractRow] = []
    for member in members:
        if not groups.takes(member.created_ms, last_ms, interval_ms, fires, max_fires):
            groups.close_group(c, group_id)
            break
        if member.callback_id in taken:
            answers.append(None)
            continue
        taken.add(member.callback_id)
        rows.append(_member_row(member, group_id))
        joins.add(group_id, member.callback_id, member.created_ms)
        fires, last_ms = fires + 1, max(last_ms, member.created_ms)
        answers.append(group_id)
    else:
        if fires >= max_fires:  # the last join filled it: the next fire of the key opens a new group
            groups.close_group(c, group_id)
    c.executemany(_INSERT_CONTRACT, rows)
    joins.step_done()
    groups.count_joins(c, joins)
    return answers


def _member_row(member: MemberJoin, group_id: str) -> ContractRow:
    """The row of a member written out, in the group of ``group_id``."""
    return (
        member.callback_id,
        member.watcher_id,
        "grouped",
        member.created_ms,
        None,
        member.doc_in(group_id),
        member.envelope,
    )


Accepted = tuple[str, str | None] | None
"""``accept_contract``'s answer: the state stored and the group joined, or None (the id exists)."""
AcceptStep = Callable[..., Accepted]
"""``accept_contract`` with every argument but the connection and ``joins`` bound."""


def accept_contracts(c: Conn, steps: Sequence[AcceptStep]) -> list[Accepted | Exception]:
    """Several ``accept_contract`` steps in one transaction, in order, each in its own savepoint
    (one that fails, whatever its error, is undone alone and answered with it: one fire's fault
    must not fail the others of its notification), the joins counted in their groups and listed
    in their contracts once at the end (``groups.count_joins``)."""
    joins = groups.BatchJoins()
    results: list[Accepted | Exception] = []
    for step in steps:
        try:
            results.append(savepoint(c, partial(step, joins=joins), "accept"))
        except Exception as exc:
            if not c.in_transaction:  # SQLite ended the transaction: the whole batch fails
                raise
            joins.step_undone()  # undone: none of its joins happened
            results.append(exc)
            continue
        joins.step_done()
    groups.count_joins(c, joins)
    return results


def _add_dedupe(c: Conn, key: str, now_ms: int, ttl_ms: int) -> bool:
    """Set ``key`` until ``now_ms + ttl_ms`` unless it is live; True when set."""
    c.execute(  # bounded housekeeping: forget a few expired keys per call
        "DELETE FROM dedupe WHERE key IN (SELECT key FROM dedupe WHERE expires_ms <= ? LIMIT 64)",
        (now_ms,),
    )
    cur = c.execute(
        """INSERT INTO dedupe (key, expires_ms) VALUES (?, ?)
            ON CONFLICT (key) DO UPDATE SET expires_ms = excluded.expires_ms
            WHERE dedupe.expires_ms <= ?""",
        (key, now_ms + ttl_ms, now_ms),
    )
    return cur.rowcount == 1


_BUMP_SESSION = """INSERT INTO sessions (session_key, last_seq, last_ms) VALUES (?, ?, ?)
    ON CONFLICT (session_key) DO UPDATE SET last_seq = last_seq + excluded.last_seq,
        last_ms = MAX(last_ms, excluded.last_ms)
    RETURNING last_seq"""


PUT_CHECKPOINT = "INSERT OR REPLACE INTO checkpoints (session_key, data) VALUES (?, ?)"


def append_transcript(
    c: Conn,
    session_key: str,
    payloads: list[str],
    at: datetime,
    checkpoints: Sequence[tuple[str, str]] = (),
) -> range:
    """Put the ``checkpoints`` (key, JSON text) and append the entries (``payloads``: their
    JSON text) after the session's last seq (kept in ``sessions``, so pruned entries' numbers
    never come back); the seqs given. Each row's doc is ``TranscriptEntry``'s JSON, put
    together here instead of validating and dumping a model per entry."""
    if checkpoints:
        c.executemany(PUT_CHECKPOINT, checkpoints)
    if not payloads:
        return range(0)
    at_ms = to_epoch_ms(at)
    [(last_seq,)] = c.execute(_BUMP_SESSION, (session_key, len(payloads), at_ms)).fetchall()
    seqs = range(int(last_seq) - len(payloads) + 1, int(last_seq) + 1)
    at_text = json.dumps(iso(utc_ms(at)))
    c.executemany(
        "INSERT INTO transcripts (session_key, seq, doc) VALUES (?, ?, ?)",
        [
            (session_key, seq, f'{{"seq":{seq},"at":{at_text},"entry":{text}}}')
            for seq, text in zip(seqs, payloads, strict=True)
        ],
    )
    return seqs


def create_inbox_item(c: Conn, item: InboxItem, rows: Sequence[DeliveryRow] = ()) -> bool:
    """Insert the item, its first history entry and its deliveries (a key already there is left
    alone), or nothing when the id exists."""
    cur = c.execute(
        "INSERT OR IGNORE INTO inbox_items (id, kind, status, created_ms, doc) VALUES (?,?,?,?,?)",
        (item.id, item.kind, item.status, to_epoch_ms(item.created_at), codec.dump_record(item)),
    )
    if cur.rowcount != 1:
        return False
    first = codec.dump_record(first_history_entry(item))
    c.execute("INSERT INTO inbox_history (item_id, doc) VALUES (?, ?)", (item.id, first))
    for row in rows:
        insert_delivery(c, row)
    return True


def transition_inbox_item(
    c: Conn,
    item_id: str,
    from_statuses: Collection[str],
    to_status: InboxStatus,
    actor: str,
    note: str | None,
    at: datetime,
) -> InboxItem | None:
    """Compare-and-set the item's status and append the history entry."""
    row = c.execute("SELECT doc FROM inbox_items WHERE id = ?", (item_id,)).fetchone()
    item = None if row is None else codec.load_record(InboxItem, row[0])
    if item is None or item.status not in from_statuses:
        return None
    moved, entry = transition(item, to_status=to_status, actor=actor, note=note, at=at)
    c.execute(
        "UPDATE inbox_items SET status = ?, doc = ? WHERE id = ?",
        (moved.status, codec.dump_record(moved), item_id),
    )
    c.execute(
        "INSERT INTO inbox_history (item_id, doc) VALUES (?, ?)",
        (item_id, codec.dump_record(entry)),
    )
    return moved


def delivery_row(d: Delivery) -> DeliveryRow:
    """The ``deliveries`` row of ``d`` (due only while pending)."""
    due_ms = to_epoch_ms(d.next_attempt_at) if d.state == "pending" else None
    return (d.key, d.callback_id, d.state, to_epoch_ms(d.created_at), due_ms, codec.dump_record(d))


def insert_delivery(c: Conn, row: DeliveryRow) -> bool:
    """Insert unless the key exists; True when inserted."""
    return c.execute(_INSERT_DELIVERY, row).rowcount == 1


_RECORD_OUTCOME = """UPDATE deliveries SET state = ?, due_ms = ?,
    doc = json_set(doc, '$.state', ?, '$.attempts', ?, '$.nextAttemptAt', ?, '$.updatedAt', ?,
        '$.lastError', ?) WHERE key = ?"""


def record_outcomes(c: Conn, outcomes: Sequence[DeliveryOutcome]) -> tuple[set[str], dict[str, str]]:
    """Record attempts' outcomes in place (``json_set`` on the stored record): pending → due at
    ``next_attempt_at``, else out of the queue. The keys updated and the contracts a notify's final
    outcome moved (``notify_outcomes``)."""
    finals = _notify_finals(c, outcomes)
    done: set[str] = set()
    for o in outcomes:
        due_ms = to_epoch_ms(o.next_attempt_at) if o.state == "pending" else None
        next_at, at = iso(utc_ms(o.next_attempt_at)), iso(utc_ms(o.at))
        args = (o.state, due_ms, o.state, o.attempts, next_at, at, o.last_error, o.key)
        if c.execute(_RECORD_OUTCOME, args).rowcount == 1:
            done.add(o.key)
    return done, notify_outcomes(c, finals)


# -- contract steps (``contract_states``) --------------------------------------------------------

_NOTIFY_PENDING = """SELECT 1 FROM deliveries WHERE callback_id = ? AND state = 'pending'
    AND (key LIKE '%:notify' OR key LIKE '%:notify.%') LIMIT 1"""

NotifyFinal = tuple[str, bool, str]  # (callback id, delivered, ISO instant of the outcome)


def _notify_finals(c: Conn, outcomes: Sequence[DeliveryOutcome]) -> list[NotifyFinal]:
    """The outcomes that end a pending notify delivery (read before they are written: an outcome
    recorded twice moves its contract once)."""
    wanted = [o for o in outcomes if o.state != "pending" and is_notify_kind(kind_of_key(o.key))]
    if not wanted:
        return []
    sql = "SELECT key, callback_id FROM deliveries WHERE state = 'pending' AND key IN"
    pending = dict(select_in(c, sql, [o.key for o in wanted]))
    finals: list[NotifyFinal] = []
    for o in wanted:
        if o.key in pending:
            finals.append((str(pending.pop(o.key)), o.state == "delivered", iso(utc_ms(o.at))))
    return finals


def notify_outcomes(c: Conn, finals: Sequence[NotifyFinal]) -> dict[str, str]:
    """Move each final notify outcome's contract (after the outcomes are written); the contracts
    moved, by callback id."""
    moved: dict[str, str] = {}
    for callback_id, delivered, at_text in finals:
        found = contract_state(c, callback_id)
        if found is None:
            continue
        if delivered:
            after = after_notify_delivered(found[0])
        else:
            pending = c.execute(_NOTIFY_PENDING, (callback_id,)).fetchone() is not None
            after = after_notify_failed(found[0], notifies_pending=pending)
        if after is not None:
            move_contract(c, callback_id, after, deadline=found[1], settled_at=at_text)
            moved[callback_id] = after
    return moved


def contract_state(c: Conn, callback_id: str) -> tuple[ContractState, str] | None:
    """``(state, deadline ISO)`` of a contract, or None."""
    row = c.execute(
        "SELECT state, json_extract(doc, '$.deadline') FROM contracts WHERE callback_id = ?", (callback_id,)
    ).fetchone()
    return None if row is None else (stored_state(str(row[0])), str(row[1]))


def move_contract(
    c: Conn, callback_id: str, state: ContractState, *, deadline: str, settled_at: str | None = None
) -> None:
    """Set a contract's state (and ``deadline``, an ISO instant); a ``pending`` one is due at its
    deadline, others leave the deadline index; a ``fulfilled`` or ``resolved`` one is settled at
    ``settled_at``."""
    due_ms = to_epoch_ms(datetime.fromisoformat(deadline)) if state == "pending" else None
    settled = settled_at if state in ("fulfilled", "resolved") else None
    c.execute(
        """UPDATE contracts SET state = ?, due_ms = ?,
            doc = json_set(doc, '$.state', ?, '$.deadline', ?, '$.settledAt', ?) WHERE callback_id = ?""",
        (state, due_ms, state, deadline, settled, callback_id),
    )


def begin_notify(
    c: Conn, callback_id: str, rows: Sequence[DeliveryRow], follow_up: bool = False
) -> tuple[str, str | None, list[str]] | None:
    """``Store.begin_notify``: ``(state before, state after, keys inserted)`` (after None when
    refused), or None."""
    found = contract_state(c, callback_id)
    if found is None:
        return None
    before, deadline = found
    asking = before == "awaiting_approval"
    pending = asking and c.execute(_NOTIFY_PENDING, (callback_id,)).fetchone() is not None
    after = after_notify(before, follow_up=follow_up, notifies_pending=pending)
    if after is None:
        return before, None, []
    inserted = [row[0] for row in rows if insert_delivery(c, row)]
    if after != before:
        move_contract(c, callback_id, after, deadline=deadline)
    return before, after, inserted


def resolve_contract(
    c: Conn, callback_id: str, rows: Sequence[DeliveryRow], at_text: str
) -> tuple[str, str] | None:
    """``Store.resolve_contract``: ``(state before, state after)``, or None."""
    found = contract_state(c, callback_id)
    if found is None:
        return None
    after = after_resolved(found[0])
    if after is None:
        return found[0], found[0]
    move_contract(c, callback_id, after, deadline=found[1], settled_at=at_text)
    c.executemany(_INSERT_DELIVERY, rows)
    return found[0], after


def pause_contract(c: Conn, callback_id: str) -> tuple[str, str] | None:
    """``Store.pause_contract``: ``(state before, state after)``, or None."""
    found = contract_state(c, callback_id)
    if found is None:
        return None
    after = after_approval_requested(found[0])
    if after is not None:
        move_contract(c, callback_id, after, deadline=found[1])
    return found[0], after or found[0]


def resume_contract(c: Conn, callback_id: str, deadline: str) -> tuple[str, str] | None:
    """``Store.resume_contract``: ``(state before, state after)``, or None."""
    found = contract_state(c, callback_id)
    if found is None:
        return None
    pending = c.execute(_NOTIFY_PENDING, (callback_id,)).fetchone() is not None
    after = after_approval_decided(found[0], notifies_pending=pending)
    if after is not None:
        move_contract(c, callback_id, after, deadline=deadline)
    return found[0], after or found[0]


def write_watcher_batch(
    c: Conn,
    rows: Sequence[tuple[str, int, str]],
    states: Sequence[tuple[str, str | None]],
    *,
    keep: int,
    trim: Sequence[str],
) -> None:
    """Append observation rows ``(watcher_id, at_ms, doc)``, trim the ``trim`` watchers' history to
    its newest ``keep``, put the states (None: delete the watcher's state)."""
    c.executemany("INSERT INTO observations (watcher_id, at_ms, doc) VALUES (?, ?, ?)", rows)
    for watcher_id in trim:
        c.execute(
            """DELETE FROM observations WHERE watcher_id = ? AND id <= (
                SELECT id FROM observations WHERE watcher_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)""",
            (watcher_id, watcher_id, keep),
        )
    c.executemany(
        "INSERT OR REPLACE INTO watcher_states (watcher_id, state) VALUES (?, ?)",
        [(wid, text) for wid, text in states if text is not None],
    )
    c.executemany(
        "DELETE FROM watcher_states WHERE watcher_id = ?", [(wid,) for wid, text in states if text is None]
    )


def silences_page(
    c: Conn, now_ms: int, state: str | None, after: tuple[int, str] | None, fetch: int
) -> list[tuple[int, str, str]]:
    """Up to ``fetch`` ``(created_ms, id, doc)`` silences, newest first, strictly after ``after``,
    in ``state`` at ``now_ms`` (``Silence.state_at`` in SQL)."""
    where = {
        None: "1",
        "active": "starts_ms <= :now AND ends_ms > :now",
        "pending": "starts_ms > :now AND ends_ms > :now",
        "expired": "ends_ms <= :now",
    }[state]
    args: dict[str, Any] = {"now": now_ms, "fetch": fetch, "ms": None, "id": None}
    if after is not None:
        where += " AND (created_ms, id) < (:ms, :id)"
        args.update(ms=after[0], id=after[1])
    sql = f"""SELECT created_ms, id, doc FROM silences WHERE {where}
        ORDER BY created_ms DESC, id DESC LIMIT :fetch"""
    return [(int(ms), str(i), str(doc)) for ms, i, doc in c.execute(sql, args)]


USAGE_EXPIRED_PER_ADD = 100  # expired counters one ``add_usage`` deletes, at most


def add_usage(
    c: Conn, keys: Sequence[str], amounts: tuple[int, int, float], at_ms: int, expires_ms: int
) -> None:
    """``Store.add_usage``: add ``amounts`` (input, output, cost) to each key's row, then delete a
    few rows expired before ``at_ms``."""
    c.executemany(
        """INSERT INTO usage (key, input_tokens, output_tokens, cost_usd, expires_ms) VALUES (?, ?, ?, ?, ?)
        ON CONFLICT (key) DO UPDATE SET input_tokens = input_tokens + excluded.input_tokens,
            output_tokens = output_tokens + excluded.output_tokens,
            cost_usd = cost_usd + excluded.cost_usd, expires_ms = excluded.expires_ms""",
        [(key, *amounts, expires_ms) for key in keys],
    )
    c.execute(
        """DELETE FROM usage WHERE key IN (
            SELECT key FROM usage WHERE expires_ms < ? ORDER BY expires_ms LIMIT ?)""",
        (at_ms, USAGE_EXPIRED_PER_ADD),
    )
