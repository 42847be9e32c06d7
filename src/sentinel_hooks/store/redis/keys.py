"""Names of every key the Redis store and the cluster write, all under one prefix (default ``sentinel:``).

Kept in one place so the layout can be read at a glance and two kinds of key can never collide:
each family has its own literal segment before any user-chosen id.

==================================  ======  ==============================================
key                                 type    holds
==================================  ======  ==============================================
health                              string  a counter ``ping`` increments (proves a write works)
watcher-states                      hash    watcher id → state JSON
observations:{watcher}              list    Observation JSON, newest first (trimmed)
contract:{callback}                 hash    doc, envelope, state
contract-due                        zset    pending callback ids by due ms
contract-index:all|watcher:|state:  zset    listing members ``{created_ms:015d}:{id}``
dedupe:{key}                        string  expiry ms (with PX)
transcript:{session}                list    ``{"at", "entry"}`` JSON; seq = head + position + 1
transcript-head:{session}           string  head: entries pruned from the list's start (absent: 0)
sessions                            zset    session key → ms of its last append (idle pruning)
checkpoint:{session}                string  checkpoint JSON
inbox-item:{id}                     hash    doc, status, kind, version
inbox-history:{id}                  list    InboxHistoryEntry JSON, oldest first
inbox-index:all|status:|kind:       zset    listing members
delivery:{key}                      hash    doc, state
delivery-due                        zset    pending delivery keys by due ms
delivery-index:callback:{callback}  zset    listing members, for list_deliveries
silences                            hash    silence id → Silence JSON
silence-ends                        zset    silence ids by ``endsAt`` ms (pruning)
usage:{key}                         hash    in, out, usd: a model usage counter (PEXPIRE)
feedback:{callbackId}               hash    person -> Feedback JSON (the latest per person)
pace:{key}                          zset    a pacing window's slots, scored by ms taken (PEXPIRE)
group:{callback}                    hash    a group (§19): key, last, sent, fires, max, interval, closed, n
group-joins:{callback}              list    members that joined after the page, not yet in a follow-up
group-resolved:{callback}           set     members the source reported over
group-open:{key}                    string  the callback id of the group key's open group
group-due                           zset    group ids by the ms their joins' follow-up is due
audit                               zset    audit listing members ``{at_ms:015d}:{id}`` (lex order)
audit-docs                          hash    audit entry id -> AuditEntry JSON
replicas                            zset    replica id → ms of its last heartbeat (cluster)
lease:{watcher}                     string  ``<replicaId>:<token>`` with PX (cluster lease)
lease-token:{watcher}               string  last fencing token handed out (INCR; kept)
session-work                        stream  ``key`` = a session key with queued callbacks;
                                            consumer group ``sessions``, one consumer per replica
session-queue:{session}             list    callback ids waiting for the session, oldest first
session-lock:{session}              string  ``<replicaId> <entryId> <nonce>`` with PX: who
                                            drains the session now
watcher-changes                     pubsub  API changes to a watcher, for its lease holder
==================================  ======  ==============================================

The cluster keys (``replicas``, ``lease*``: cluster/membership.py, cluster/leases.py; ``session*``:
callbacks/queues/stream.py; ``watcher-changes``: cluster/changes.py) exist only when replicas run on Redis
(docs/scaling.md).
"""

from __future__ import annotations


class RedisKeys:
    """Key names under ``prefix``."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.health = f"{prefix}health"
        self.watcher_states = f"{prefix}watcher-states"
        self.contract_due = f"{prefix}contract-due"
        self.contract_doc_prefix = f"{prefix}contract:"
        self.inbox_doc_prefix = f"{prefix}inbox-item:"
        self.delivery_due = f"{prefix}delivery-due"
        self.delivery_doc_prefix = f"{prefix}delivery:"
        self.session_work = f"{prefix}session-work"
        self.sessions = f"{prefix}sessions"
        self.silences = f"{prefix}silences"
        self.silence_ends = f"{prefix}silence-ends"
        self.audit = f"{prefix}audit"
        self.audit_docs = f"{prefix}audit-docs"
        self.group_due = f"{prefix}group-due"

    def observations(self, watcher_id: str) -> str:
        return f"{self.prefix}observations:{watcher_id}"

    def contract(self, callback_id: str) -> str:
        return f"{self.contract_doc_prefix}{callback_id}"

    def contract_index(self, watcher_id: str | None, state: str | None) -> str:
        """The listing index for a filter (None: not filtered on that field)."""
        base = f"{self.prefix}contract-index:"
        if watcher_id is None:
            return f"{base}all" if state is None else f"{base}state:{state}"
        if state is None:
            return f"{base}watcher:{watcher_id}"
        return f"{base}state-watcher:{state}:{watcher_id}"

    def dedupe(self, key: str) -> str:
        return f"{self.prefix}dedupe:{key}"

    def group_open(self, key: str) -> str:
        """The callback id of the open group of a group key (SPEC §19)."""
        return f"{self.prefix}group-open:{key}"

    def transcript(self, session_key: str) -> str:
        return f"{self.prefix}transcript:{session_key}"

    def transcript_head(self, session_key: str) -> str:
        return f"{self.prefix}transcript-head:{session_key}"

    def usage(self, key: str) -> str:
        return f"{self.prefix}usage:{key}"

    def pace(self, key: str) -> str:
        return f"{self.prefix}pace:{key}"

    def feedback(self, callback_id: str) -> str:
        return f"{self.prefix}feedback:{callback_id}"

    def checkpoint(self, session_key: str) -> str:
        return f"{self.prefix}checkpoint:{session_key}"

    def inbox_item(self, item_id: str) -> str:
        return f"{self.inbox_doc_prefix}{item_id}"

    def inbox_history(self, item_id: str) -> str:
        return f"{self.prefix}inbox-history:{item_id}"

    def inbox_index(self, status: str | None, kind: str | None) -> str:
        """The listing index for a filter (None: not filtered on that field)."""
        base = f"{self.prefix}inbox-index:"
        if status is None:
            return f"{base}all" if kind is None else f"{base}kind:{kind}"
        if kind is None:
            return f"{base}status:{status}"
        return f"{base}status-kind:{status}:{kind}"

    def delivery(self, key: str) -> str:
        return f"{self.delivery_doc_prefix}{key}"

    def delivery_index(self, callback_id: str) -> str:
        return f"{self.prefix}delivery-index:callback:{callback_id}"

    def session_queue(self, session_key: str) -> str:
        return f"{self.prefix}session-queue:{session_key}"

    def session_lock(self, session_key: str) -> str:
        return f"{self.prefix}session-lock:{session_key}"
