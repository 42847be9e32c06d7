"""The SQLite store's grouping steps (SPEC §19), as plain functions of a connection, each run inside
the caller's ``BEGIN IMMEDIATE`` transaction (``queries.accept_contract``, ``SqliteStore``): the
open-or-join of a fire, and the follow-ups gathering the fires that joined after the page.

Table ``groups`` (``schema._V8``): one row per group, by its contract's callback id, kept after it
closes (its members' resolutions still count) until retention prunes its contract. ``resolved``
is a JSON array of the members the source reported over. ``unreported`` is a JSON array of
the member ids that joined after the page and reached nobody yet; ``due_ms`` is when their
follow-up is due (or the end of the claim holding it), at most every ``interval_ms`` after the
last one (``sent_ms``, at first the group's opening).
"""

from __future__ import annotations

import json
import sqlite3

from sentinel_hooks.store.records import JoinBatch

Conn = sqlite3.Connection
BEFORE_PAGE = ("pending", "awaiting_approval")
"""Group contract states in which a join still reaches people with the page (the fallback lists it)."""


class BatchJoins:
    """The joins of one batch of accepts (``queries.accept_contracts``) not yet counted in their
    groups' rows: ``count_joins`` writes each group's once, when the batch ends, instead of one
    update per join (a storm's notification brings fifty). Until then ``open_group`` and
    ``join_group`` add them to what the rows say. A step's joins join the batch's only when the
    step succeeded (``step_done``); a step undone takes its own with it (``step_undone``)."""

    def __init__(self) -> None:
        self.done: dict[str, list[tuple[str, int]]] = {}
        self._done_sum: dict[str, tuple[int, int]] = {}  # per group: how many done, the latest
        self._step: dict[str, list[tuple[str, int]]] = {}

    def add(self, group_id: str, member_id: str, now_ms: int) -> None:
        self._step.setdefault(group_id, []).append((member_id, now_ms))

    def pending(self, group_id: str) -> tuple[int, int]:
        """How many joins of ``group_id`` are not counted yet, and the latest one's instant (0)."""
        count, latest = self._done_sum.get(group_id, (0, 0))
        step = self._step.get(group_id, ())
        return count + len(step), max([latest, *(at for _, at in step)])

    def step_done(self) -> None:
        for group_id, joins in self._step.items():
            self.done.setdefault(group_id, []).extend(joins)
            count, latest = self._done_sum.get(group_id, (0, 0))
            self._done_sum[group_id] = (count + len(joins), max([latest, *(at for _, at in joins)]))
        self._step = {}

    def step_undone(self) -> None:
        self._step = {}


OpenRow = tuple[str, int, int, int, int]
"""An open group's ``(group_id, last_ms, interval_ms, fires, max_fires)``."""


def open_row(c: Conn, key: str) -> OpenRow | None:
    """The row of the group of ``key`` not closed yet, if any."""
    row = c.execute(
        "SELECT group_id, last_ms, interval_ms, fires, max_fires FROM groups WHERE key = ? AND closed = 0",
        (key,),
    ).fetchone()
    if row is None:
        return None
    group_id, last_ms, interval_ms, fires, max_fires = row
    return str(group_id), int(last_ms), int(interval_ms), int(fires), int(max_fires)


def takes(now_ms: int, last_ms: int, interval_ms: int, fires: int, max_fires: int) -> bool:
    """Whether a group not closed yet takes a fire at ``now_ms``: it has not gone quiet (a fire
    within ``interval_ms``) and is not full."""
    return now_ms - last_ms < interval_ms and fires < max_fires


def open_group(c: Conn, key: str, now_ms: int, joins: BatchJoins | None = None) -> str | None:
    """The id of the group of ``key`` that takes a fire at ``now_ms``, closing one that went quiet
    (its row's count and last fire with the batch's ``joins`` not yet written)."""
    row = open_row(c, key)
    if row is None:
        return None
    group_id, last_ms, interval_ms, fires, max_fires = row
    added, added_ms = joins.pending(group_id) if joins is not None else (0, 0)
    if takes(now_ms, max(last_ms, added_ms), interval_ms, fires + added, max_fires):
        return group_id
    close_group(c, group_id)
    return None


def close_group(c: Conn, group_id: str) -> None:
    """Close the group: the next fire of its key opens a new one."""
    c.execute("UPDATE groups SET closed = 1 WHERE group_id = ?", (group_id,))


def start_group(c: Conn, group_id: str, key: str, now_ms: int, interval_ms: int, max_fires: int) -> None:
    """Open a group of ``key`` whose contract is ``group_id``'s (the fire just stored)."""
    c.execute(
        """INSERT INTO groups (group_id, key, opened_ms, last_ms, sent_ms, fires, max_fires,
            interval_ms, closed, followups, unreported, due_ms)
            VALUES (?, ?, ?, ?, ?, 1, ?, ?, 0, 0, '[]', NULL)""",
        (group_id, key, now_ms, now_ms, now_ms, max_fires, interval_ms),
    )
    if max_fires <= 1:
        close_group(c, group_id)


def join_group(c: Conn, group_id: str, member_id: str, now_ms: int, joins: BatchJoins | None = None) -> None:
    """``member_id`` joins: the group's contract counts it and lists it; after the page it waits
    for the next follow-up; at ``max_fires`` the group closes. With ``joins`` (a batch of accepts)
    the counting and listing wait for ``count_joins``; only the close is made now, so that the
    batch's next fire of the key opens a new group."""
    if joins is None:
        list_members(c, {group_id: [member_id]})
        full = c.execute(_JOIN, {"now": now_ms, "member": member_id, "group": group_id}).fetchone()
    else:
        joins.add(group_id, member_id, now_ms)
        added, _ = joins.pending(group_id)
        full = c.execute(
            "SELECT fires + ? >= max_fires FROM groups WHERE group_id = ?", (added, group_id)
        ).fetchone()
    if full is not None and full[0]:
        close_group(c, group_id)


def count_joins(c: Conn, joins: BatchJoins) -> None:
    """Write the batch's joins in their groups: each group's row counts them (its last fire the
    latest of them), lists them for the next follow-up when its contract is past its page (due
    then as a single join would have made it), and its contract lists them, in order."""
    for group_id, members in joins.done.items():
        first_ms, last_ms = members[0][1], max(at for _, at in members)
        row = c.execute(
            f"SELECT unreported, {_PAGED} FROM groups WHERE group_id = :group", {"group": group_id}
        ).fetchone()
        if row is None:
            continue
        unreported = json.loads(row[0]) + [m for m, _ in members] if row[1] else None
        c.execute(
            """UPDATE groups SET fires = fires + :n, last_ms = MAX(last_ms, :last),
                unreported = COALESCE(:unreported, unreported),
                due_ms = CASE WHEN :paged AND due_ms IS NULL THEN MAX(:first, sent_ms + interval_ms)
                    ELSE due_ms END
                WHERE group_id = :group""",
            {
                "n": len(members),
                "last": last_ms,
                "first": first_ms,
                "unreported": None if unreported is None else json.dumps(unreported),
                "paged": bool(row[1]),
                "group": group_id,
            },
        )
    list_members(c, {group_id: [m for m, _ in members] for group_id, members in joins.done.items()})


_PAGED = f"""COALESCE((SELECT state NOT IN {BEFORE_PAGE!r} FROM contracts WHERE callback_id = :group), 0)"""
_JOIN = f"""UPDATE groups SET fires = fires + 1, last_ms = :now,
    unreported = CASE WHEN {_PAGED} THEN json_insert(unreported, '$[#]', :member) ELSE unreported END,
    due_ms = CASE WHEN {_PAGED} AND due_ms IS NULL THEN MAX(:now, sent_ms + interval_ms) ELSE due_ms END
    WHERE group_id = :group RETURNING fires >= max_fires"""
"""``join_group`` in one statement: the member counted, listed for the next follow-up when the
group's contract is past its page, and whether the group is full now."""


LIST_CHUNK = 200  # members appended per statement (two parameters each)


def list_members(c: Conn, listed: dict[str, list[str]]) -> None:
    """Count and list each group's new members in its contract (``join_group``), in order: its
    text edited where it ends (``_listed``), else with SQLite's JSON functions."""
    for group_id, members in listed.items():
        row = c.execute("SELECT doc FROM contracts WHERE callback_id = ?", (group_id,)).fetchone()
        doc = None if row is None else _listed(str(row[0]), members)
        if doc is not None:
            c.execute("UPDATE contracts SET doc = ? WHERE callback_id = ?", (doc, group_id))
            continue
        for start in range(0, len(members), LIST_CHUNK):
            chunk = members[start : start + LIST_CHUNK]
            paths = ", ".join(["'$.group.members[#]', ?"] * len(chunk))
            c.execute(
                f"""UPDATE contracts SET doc = json_set(doc,
                    '$.group.fires', json_extract(doc, '$.group.fires') + ?, {paths})
                    WHERE callback_id = ?""",
                (len(chunk), *chunk, group_id),
            )


_MEMBERS = ',"members":['
_FIRES = ',"fires":'


def _listed(doc: str, members: list[str]) -> str | None:
    """``doc``, a group's contract text, counting and listing ``members`` after the ones it lists;
    None for a text not written as Sentinel writes a group's (its ``group`` last, whose last keys
    are ``fires`` and ``members``). Its end is edited, not the whole text parsed: with a thousand
    members, SQLite's ``json_set`` of twenty appended ids cost 7 µs per member, and more as the
    list grew. The last ``,"members":[`` is the group's: a quote inside a string is escaped."""
    at = doc.rfind(_MEMBERS)
    if at < 0 or not doc.endswith("]}}"):
        return None
    head, found, fires = doc[:at].rpartition(_FIRES)
    if not found or not (fires.isascii() and fires.isdigit()):
        return None
    listed = doc[at + len(_MEMBERS) : -3]
    added = ",".join(json.dumps(member) for member in members)
    return f"{head}{_FIRES}{int(fires) + len(members)}{_MEMBERS}{listed}{',' if listed else ''}{added}]}}}}"


def claim_joins(c: Conn, now_ms: int, limit: int, lease_ms: int) -> list[JoinBatch]:
    """Up to ``limit`` groups whose joins' follow-up is due, leased for ``lease_ms``."""
    rows = c.execute(
        """SELECT group_id, unreported, followups FROM groups WHERE due_ms IS NOT NULL AND due_ms <= ?
            ORDER BY due_ms, group_id LIMIT ?""",
        (now_ms, limit),
    ).fetchall()
    c.executemany(
        "UPDATE groups SET due_ms = ? WHERE group_id = ?", [(now_ms + lease_ms, row[0]) for row in rows]
    )
    return [JoinBatch(str(gid), tuple(json.loads(text)), int(sent) + 1) for gid, text, sent in rows]


def joins_reported(c: Conn, batch: JoinBatch, now_ms: int) -> bool:
    """The follow-up of ``batch`` was enqueued: its members leave ``unreported``; the next joins are
    due ``interval_ms`` from now. False (nothing changed) when another claimer recorded it first."""
    row = c.execute(
        "SELECT unreported, followups FROM groups WHERE group_id = ?", (batch.group_id,)
    ).fetchone()
    if row is None or int(row[1]) != batch.ordinal - 1:
        return False
    unreported: list[str] = json.loads(row[0])
    if tuple(unreported[: len(batch.members)]) != batch.members:
        return False
    rest = unreported[len(batch.members) :]
    c.execute(
        """UPDATE groups SET unreported = ?, followups = ?, sent_ms = ?,
            due_ms = CASE WHEN ? THEN ? + interval_ms ELSE NULL END WHERE group_id = ?""",
        (json.dumps(rest), batch.ordinal, now_ms, bool(rest), now_ms, batch.group_id),
    )
    return True


def member_resolved(c: Conn, group_id: str, member_id: str) -> bool:
    """The source reported ``member_id`` over: True once every member of the group is (the group
    closes then), or for a group the store does not know."""
    row = c.execute("SELECT fires, resolved FROM groups WHERE group_id = ?", (group_id,)).fetchone()
    if row is None:
        return True
    resolved: list[str] = json.loads(row[1])
    if member_id not in resolved:
        resolved.append(member_id)
        c.execute("UPDATE groups SET resolved = ? WHERE group_id = ?", (json.dumps(resolved), group_id))
    if len(resolved) < int(row[0]):
        return False
    close_group(c, group_id)
    return True
