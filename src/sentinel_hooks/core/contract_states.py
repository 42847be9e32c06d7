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

A fulfilled contract takes further notifies (follow-ups of the agent's own answer) and stays
fulfilled; after ``fallback_sent`` or ``expired`` a notify is refused, so people never get both
the fallback and the agent's message. A fire its source reports over before anything paged
(SPEC §6.4) settles ``resolved``: no fallback, and its session's later notifies are refused.
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
]

OPEN_STATES: frozenset[str] = frozenset({"pending", "notifying", "awaiting_approval"})
FINAL_STATES: frozenset[str] = frozenset(
    {"fulfilled", "fallback_sent", "expired", "resolved", "deduped", "silenced"}
)
TAKES_NOTIFY: frozenset[str] = frozenset({"pending", "notifying", "awaiting_approval", "fulfilled"})


def after_notify(state: ContractState) -> ContractState | None:
    """A notify is handed to delivery: ``pending`` → ``notifying``.

    ``notifying``, ``awaiting_approval`` and ``fulfilled`` take it and stay; any other state
    refuses it (``after_notify`` is then None and nothing may be enqueued).
    """
    if state == "pending":
        return "notifying"
    return state if state in TAKES_NOTIFY else None


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
    or ``notifying`` contract (no target accepted a notify yet: that would have fulfilled it) is
    ``resolved``, with no fallback. Any other state is left alone: after the page the resolution
    is a follow-up, and an open approval keeps its contract until it is decided."""
    return "resolved" if state in ("pending", "notifying") else None


def is_notify_kind(kind: str) -> bool:
    """``notify``, ``notify.2``, ``notify.3``… (the agent's messages, SPEC §6.2)."""
    return kind == "notify" or kind.startswith("notify.")


def kind_of_key(key: str) -> str:
    """The delivery kind at the end of a key ``{callbackId}:{target}:{kind}`` (kinds have no ``:``)."""
    return key.rsplit(":", 1)[-1]
