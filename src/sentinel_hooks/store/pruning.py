"""What ``Store.prune`` may delete and what it reports back (SPEC.md §18). Pure.

The caller (the retention loop) turns the ``retention`` settings and the clock into cutoff
instants; a store deletes only records that are settled or closed and older than them, in bounded
steps. The rules every store applies are here, in words and as the small predicates the memory
store runs (SQLite says the same in SQL, Redis in Lua):

* a contract goes when it is final (fulfilled, fallback_sent, expired, resolved, deduped, silenced), was
  created and
  settled before ``callbacks`` and has no delivery still pending; with it go its envelope, its
  deliveries, its checkpoints (``callback_checkpoints`` prefixes + callback id) and, from the head
  of its session's transcript, the entries of callbacks that no longer exist (seq numbers of the
  entries left, and of later appends, do not change);
* an inbox item goes when it is closed (resolved, approved, denied, expired), was created and
  last changed before ``inbox`` and has no escalation delivery still pending, with its history and
  the deliveries of its escalation chain (their callback id is the item's id);
* a session goes when nothing was appended to its transcript since ``sessions`` and no open
  contract (pending, notifying, awaiting_approval) belongs to it: its transcript and its
  checkpoints (``session_checkpoints`` prefixes + session key). Its next callback starts afresh
  at seq 1;
* a silence goes when it ended (``endsAt``) before ``silences``.

Open contracts, open or acked inbox items and sessions with an open contract are never deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sentinel_hooks.clock import iso
from sentinel_hooks.core.contract_states import FINAL_STATES, OPEN_STATES
from sentinel_hooks.store.records import utc_ms

PRUNED_CONTRACT_STATES: tuple[str, ...] = tuple(sorted(FINAL_STATES))
OPEN_CONTRACT_STATES: tuple[str, ...] = tuple(sorted(OPEN_STATES))
CLOSED_INBOX_STATUSES: tuple[str, ...] = ("approved", "denied", "expired", "resolved")
TRIM_PER_CONTRACT = 40  # transcript entries a step may trim per contract it deletes (bounds one step)


@dataclass(frozen=True)
class PruneBefore:
    """Cutoffs of one prune step (None: that kind is kept, whatever its age)."""

    callbacks: datetime | None = None
    inbox: datetime | None = None
    sessions: datetime | None = None
    silences: datetime | None = None
    callback_checkpoints: tuple[str, ...] = ()
    session_checkpoints: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pruned:
    """What one prune step deleted; ``more`` when a kind reached the step's limit (call again)."""

    contracts: int = 0
    deliveries: int = 0
    transcript_entries: int = 0
    sessions: int = 0
    inbox_items: int = 0
    more: bool = False
    silences: int = 0

    def __add__(self, other: Pruned) -> Pruned:
        return Pruned(
            self.contracts + other.contracts,
            self.deliveries + other.deliveries,
            self.transcript_entries + other.transcript_entries,
            self.sessions + other.sessions,
            self.inbox_items + other.inbox_items,
            self.more or other.more,
            self.silences + other.silences,
        )

    def counts(self) -> dict[str, int]:
        """The counts by kind (what the ``sentinel_pruned_total`` metric is labelled with)."""
        return {
            "contracts": self.contracts,
            "deliveries": self.deliveries,
            "transcript_entries": self.transcript_entries,
            "sessions": self.sessions,
            "inbox_items": self.inbox_items,
            "silences": self.silences,
        }


def older(at: str | None, cutoff: str) -> bool:
    """Whether the ISO instant ``at`` (as records store it) is before ``cutoff`` (ISO too; both have
    the same fixed width, so text order is time order). A missing instant counts as old."""
    return at is None or at < cutoff


def cutoff_text(cutoff: datetime) -> str:
    """``cutoff`` as records store instants (compared as text by ``older`` and the scripts)."""
    return iso(utc_ms(cutoff))
