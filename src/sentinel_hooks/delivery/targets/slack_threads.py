"""One Slack thread per fire (SPEC.md §16): which message starts a callback's thread, which reply
in it, what the root shows, and where the thread is remembered.

A bot-token Slack target posts the first message of a callback (the fan-out line, the agent's
notify, or the fallback when neither came first) as the thread's root, and every later message of
that callback as a reply (``thread_ts``). A reply that says how the fire ended edits the root
(``chat.update``) to show it: ✅ handled by the agent (a notify), ⚠️ fallback, ✔ resolved. A
follow-up (an agent notify after the page, SPEC §6.4) replies too, and turns a root's ⚠️ fallback
into ⚠️ fallback — agent findings in thread.
Resolved lines and escalation steps only ever reply: with no thread they post on their own, so a
line about an unknown fire (a probe episode, an inbox item without a callback) starts nothing.

The thread is durable: ``Thread`` is kept in the store as the checkpoint
``slack-thread:{target}:{callbackId}`` (pruned with its callback, see ``retention.py``), so a
restart or another replica replies in the same thread. It also holds the ts of every message
posted, by delivery key: a delivery sent again after its post got through (the outbox could not
record it, or the process died) is not posted twice.

Messages of one callback to one target are posted one at a time in a process (``KeyedLocks``), so
two sent at once make one thread. Replicas share no lock: two replicas posting the first two
messages of one callback to one target in the same instant can start two threads (later messages
reply in the one whose checkpoint was written last), and a retry that lands on another replica
while the first post is still being recorded can post twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from sentinel_hooks.delivery.targets.base import Message
from sentinel_hooks.store.shortcuts import get_checkpoint

if TYPE_CHECKING:
    from sentinel_hooks.store.base import CheckpointStore

log = logging.getLogger(__name__)

THREAD_PREFIX = "slack-thread:"
HANDLED = "✅ handled by the agent"
FALLBACK = "⚠️ fallback"
FINDINGS = "⚠️ fallback — agent findings in thread"
RESOLVED = "✔ resolved"
_OUTCOMES = {"notify": HANDLED, "fallback": FALLBACK, "resolved": RESOLVED}
_STARTERS = frozenset({"fanout", "notify", "fallback"})
ROOT_CHARS = 3000  # of the root's text kept to redraw it (a section block shows no more)


def thread_prefix(target: str) -> str:
    """The checkpoint key of ``target``'s threads, less the callback id (what retention prunes)."""
    return f"{THREAD_PREFIX}{target}:"


def thread_key(target: str, callback_id: str) -> str:
    """The checkpoint that remembers ``target``'s thread of ``callback_id``."""
    return thread_prefix(target) + callback_id


def _base(kind: str) -> str:
    """``notify.2`` → ``notify``; ``escalation.1`` → ``escalation``."""
    return kind.split(".", 1)[0]


def starts_thread(kind: str) -> bool:
    """Whether a message of this delivery kind may be a thread's root (resolved and escalation
    lines only reply)."""
    return _base(kind) in _STARTERS


def broadcasts(kind: str) -> bool:
    """Whether a reply of this kind is also shown in the channel: an escalation step is there to
    reach people who have not answered, and a reply alone reaches only the thread's followers."""
    return _base(kind) == "escalation"


def outcome_of(kind: str) -> str | None:
    """What a message of this kind says about how the fire ended (shown on the root), if anything."""
    return _OUTCOMES.get(_base(kind))


def root_outcomes(kind: str) -> tuple[str, ...]:
    """What a root of this kind shows from the start: its own outcome (a notify's ✅), if any."""
    outcome = outcome_of(kind)
    return (outcome,) if outcome is not None else ()


@dataclass(frozen=True)
class Thread:
    """A callback's thread in one target: where its root is, what the root said, the outcomes it
    shows, and the ts of each message posted in it, by delivery key."""

    channel: str
    ts: str
    root: Message
    outcomes: tuple[str, ...] = ()
    posted: Mapping[str, str] = field(default_factory=dict)
    actions: tuple[dict[str, Any], ...] = ()  # the root's buttons (SPEC §21), redrawn with it

    @classmethod
    def started(
        cls, channel: str, ts: str, root: Message, key: str, actions: Sequence[dict[str, Any]] = ()
    ) -> Thread:
        """The thread ``root`` (delivery ``key``) just started; it shows its own outcome, if any."""
        kept = Message(
            callback_id=root.callback_id,
            watcher_id=root.watcher_id,
            event_name=root.event_name,
            priority=root.priority,
            kind=root.kind,
            text=root.text[:ROOT_CHARS],
        )
        return cls(channel, ts, kept, root_outcomes(root.kind), {key: ts}, tuple(actions))

    def replied(self, key: str, ts: str, kind: str, *, follow_up: bool = False) -> Thread:
        """This thread after the reply ``key`` (posted as ``ts``), with the reply's outcome added
        (a ``follow_up``'s: the fallback's outcome now says the agent's findings are here)."""
        outcome = None if follow_up else outcome_of(kind)
        outcomes = self.outcomes
        if follow_up:
            outcomes = tuple(FINDINGS if o == FALLBACK else o for o in outcomes)
        if outcome == FALLBACK and FINDINGS in outcomes:
            outcome = None
        if outcome is not None and outcome not in outcomes:
            outcomes = (*outcomes, outcome)
        return Thread(self.channel, self.ts, self.root, outcomes, {**self.posted, key: ts}, self.actions)

    def clicked(self, line: str, *, closed: bool) -> Thread:
        """This thread after a button click on its root: ``line`` (who did what) shown among the
        outcomes, and no buttons once the page is ``closed``."""
        outcomes = self.outcomes if line in self.outcomes else (*self.outcomes, line)
        return replace(self, outcomes=outcomes, actions=() if closed else self.actions)

    def to_json(self) -> dict[str, Any]:
        return {
            "channel": self.channel,
            "ts": self.ts,
            "root": self.root.to_json(),
            "outcomes": list(self.outcomes),
            "posted": dict(self.posted),
            "actions": list(self.actions),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Thread | None:
        """The thread a checkpoint holds, or None when it holds none (or not one of ours)."""
        channel, ts, root = data.get("channel"), data.get("ts"), data.get("root")
        if not (isinstance(channel, str) and isinstance(ts, str) and isinstance(root, Mapping)):
            return None
        try:
            message = Message.from_json(root)
        except TypeError:
            return None
        outcomes = tuple(o for o in data.get("outcomes") or () if isinstance(o, str))
        posted = {k: v for k, v in (data.get("posted") or {}).items() if isinstance(v, str)}
        actions = tuple(a for a in data.get("actions") or () if isinstance(a, dict))
        return cls(channel, ts, message, outcomes, posted, actions)


class KeyedLocks:
    """One ``asyncio.Lock`` per key, made on first use and dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Hold ``key``'s lock (a caller bounds the wait with its own timeout)."""
        lock, users = self._locks.get(key) or (asyncio.Lock(), 0)
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            users = self._locks[key][1]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def users(self, key: str) -> int:
        """How many hold or wait for ``key``'s lock now."""
        return self._locks.get(key, (None, 0))[1]


class ThreadBook:
    """One target's threads: kept in the store, posted to one callback at a time in this process."""

    def __init__(self, target: str, store: CheckpointStore) -> None:
        self._target = target
        self._store = store
        self.locks = KeyedLocks()

    async def get(self, callback_id: str) -> Thread | None:
        """The callback's thread, or None (none yet, or a checkpoint that holds none). Raises the
        store's error: nothing was posted yet, so the delivery can be tried again."""
        key = thread_key(self._target, callback_id)
        data = await get_checkpoint(self._store, key)
        thread = Thread.from_json(data) if data is not None else None
        if data is not None and thread is None:
            log.warning("slack thread checkpoint %s holds no thread; starting a new one", key)
        return thread

    async def put(self, thread: Thread) -> None:
        """Remember ``thread``. Never raises: it runs after a post went through, which a retry
        must not repeat; a thread not remembered costs a second thread later, not a message."""
        key = thread_key(self._target, thread.root.callback_id)
        try:
            await self._store.put_checkpoint(key, thread.to_json())
        except Exception as exc:
            log.error("remembering slack thread %s failed (later messages may start another): %s", key, exc)
