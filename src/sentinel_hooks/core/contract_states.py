"""The response contract's state machine (SPEC.md §6.1), as pure functions of states. Pure.

Every store applies these rules inside its own atomic steps (the SQLite store calls them; the
Redis scripts spell the same table out in Lua, see ``store/redis/scripts.py``), and the relay
is the only component that asks for the steps. Each function returns the state after the event,
or ``None`` when the event leaves the contract as it is.

::

    pending ──notify──► notifying ──a notify delivery accepted──► fulfilled
       ▲  │                 │  │
       │  │                 │  └──every notify delivery failed for good──► pending (due at once if late)
       │  │                 └──approval requested──► awaiting_approval
       │  ├──approval requested──► awaiting_approval ──decided / timed out──► pending (new deadline)
       │  │                              (notifying instead while a notify may still succeed)
       │  ├──deadline──► fallback_sent (fallback mode concise) | expired (mode none)
       │  └──the source reports the fire over──► resolved (also from notifying: nothing accepted yet)
       └── (deduped: refused by the dedupe window, final from the start)
           (silenced: muted by a silence or maintenance window, final from the start: SPEC §14)
           (grouped: joined an open group, whose contract speaks for it: final from the start, §19)

The first message that settles a contract is its page (SPEC §6.4): the agent's first notify a
target accepts, or the fallback. The page is decided in the store's atomic notify step: only a
contract with no page candidate in flight (``pending``, or ``awaiting_approval`` with no notify
delivery pending) takes a notify as its page candidate; a notify handed over while one is in
flight (``notifying``), or once the contract settled with a page (``fulfilled``,
``fallback_sent``) or without one (``expired``, fallback mode none: nobody heard anything, the
agent's findings still reach people), is a follow-up: delivered, never refused, never a second
page. So two quick notifies, on one replica or two, give one page and one follow-up. After
``deduped``, ``silenced`` and ``resolved`` a notify is refused. A fire its source reports over
before anything paged (SPEC §6.4) settles ``resolved``: no fallback, and its session's later
notifies are refused.

::

    notifying | fulfilled | fallback_sent | expired ──notify (a follow-up)──► the same state
"""

from __future__ import annotations

from typing import Literal

ContractState = Literal[
    "pending",
    "notifying",
    "awaiting_approval",
    "fulfilled",
    "fallback_sent",
    "expired",
    "resolved",
    "deduped",
    "silenced",
    "grouped",
]

OPEN_STATES: frozenset[str] = frozenset({"pending", "notifying", "awaiting_approval"})
FINAL_STATES: frozenset[str] = frozenset(
    {"fulfilled", "fallback_sent", "expired", "resolved", "deduped", "silenced", "grouped"}
)
PAGED_STATES: frozenset[str] = frozenset({"fulfilled", "fallback_sent"})
"""Settled with a page: every notify from now on is a follow-up (SPEC §6.4)."""
FOLLOW_UP_STATES: frozenset[str] = PAGED_STATES | {"expired", "notifying"}
"""States that take a notify as a follow-up (``awaiting_approval`` too while a notify is pending)."""


def after_notify(
    state: ContractState, *, follow_up: bool = False, notifies_pending: bool = False
) -> ContractState | None:
    """A notify is handed to delivery: ``pending`` → ``notifying``.

    As a page candidate (``follow_up`` False) it is taken only while no other candidate is in
    flight: ``pending`` (→ ``notifying``) and ``awaiting_approval`` with no notify delivery
    pending (stays). As a follow-up it is taken by ``FOLLOW_UP_STATES`` and by
    ``awaiting_approval`` with a notify pending, and leaves the state as it is. Any other pairing
    refuses it (None, nothing may be enqueued): the caller asked for the wrong one and tries the
    other, or the contract takes no notify at all (``resolved``, ``deduped``, ``silenced``, ``grouped``).
    """
    if state == "awaiting_approval":
        return state if follow_up == notifies_pending else None
    if follow_up:
        return state if state in FOLLOW_UP_STATES else None
    return "notifying" if state == "pending" else None


def takes_notify(state: ContractState) -> bool:
    """Whether a notify is delivered at all in this state (as a page candidate or a follow-up)."""
    return state in OPEN_STATES or state in FOLLOW_UP_STATES


def after_notify_delivered(state: ContractState) -> ContractState | None:
    """A target accepted a notify: an open contract is ``fulfilled`` (final states stay)."""
    return "fulfilled" if state in OPEN_STATES else None


def after_notify_failed(state: ContractState, *, notifies_pending: bool) -> ContractState | None:
    """A notify delivery failed for good: with no other notify delivery of the callback still
    pending, a ``notifying`` contract is ``pending`` again (its fallback is due at its deadline,
    at once if that has passed). An open approval keeps ``awaiting_approval``."""
    if state == "notifying" and not notifies_pending:
        return "pending"
    return None


def after_approval_requested(state: ContractState) -> ContractState | None:
    """The session waits for an approval: no fallback is due while it is open."""
    return "awaiting_approval" if state in ("pending", "notifying") else None


def after_approval_decided(state: ContractState, *, notifies_pending: bool) -> ContractState | None:
    """The approval was decided or timed out: the agent gets a fresh deadline to report
    (``notifying`` instead of ``pending`` while an earlier notify may still succeed)."""
    if state != "awaiting_approval":
        return None
    return "notifying" if notifies_pending else "pending"


def after_resolved(state: ContractState) -> ContractState | None:
    """The source reports the fire's condition over before its page (SPEC §6.4): a ``pending``
    contract is ``resolved``, with no fallback. Any other state is left alone: after the page the
    resolution is a follow-up, and an open approval keeps its contract until it is decided.

    A ``notifying`` contract is left alone too: its page was decided when the agent's notify was
    handed over (``after_notify``), and that message may be on the wire already, so settling
    ``resolved`` now could page people twice (the agent's message and the resolved line). The
    resolution follows the agent's page as a follow-up instead."""
    return "resolved" if state == "pending" else None


def is_notify_kind(kind: str) -> bool:
    """``notify``, ``notify.2``, ``notify.3``… (the agent's messages, SPEC §6.2)."""
    return kind == "notify" or kind.startswith("notify.")


def kind_of_key(key: str) -> str:
    """The delivery kind at the end of a key ``{callbackId}:{target}:{kind}`` (kinds have no ``:``)."""
    return key.rsplit(":", 1)[-1]
