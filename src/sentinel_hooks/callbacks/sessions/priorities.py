"""The priority a group's session pages with: the most urgent of its members' (SPEC §19), each
member's contract read once per process.

A storm's group holds a thousand members, and its session notifies once for the page and once
per follow-up: making every member's contract at each notify parsed a thousand records each
time (a tenth of the event loop in a 5,000-alert storm). Only their priorities are read
(``ContractStore.trigger_priorities``), and since a member's priority never changes and a
group's member list only grows at its end, what was read of a group is kept: its count and
their most urgent priority, and a notify reads the members listed since.
"""

from __future__ import annotations

from collections.abc import Sequence

from sentinel_hooks.core.grouping import PRIORITY_ORDER, highest_priority
from sentinel_hooks.store.base import ContractStore


class GroupPriorities:
    """What each group's members were read to be so far, for the last ``limit`` groups."""

    def __init__(self, limit: int = 1024) -> None:
        self._limit = limit
        self._read: dict[str, tuple[int, str]] = {}  # group id: (members read, their most urgent)

    async def highest(self, store: ContractStore, group_id: str, own: str, members: Sequence[str]) -> str:
        """The most urgent of ``own`` (the group's first fire's) and its ``members``' priorities."""
        read, highest = self._read.get(group_id, (0, own))
        if read > len(members):  # not the list read before (it only grows): read it all again
            read, highest = 0, own
        if highest != PRIORITY_ORDER[-1] and read < len(members):
            highest = highest_priority([highest, *await store.trigger_priorities(members[read:])])
        if group_id not in self._read and len(self._read) >= self._limit:
            del self._read[next(iter(self._read))]  # the group noted longest ago
        self._read[group_id] = len(members), highest
        return highest
