"""Who should own a watcher: rendezvous (highest-random-weight) hashing. Pure.

Every (watcher, replica) pair gets a pseudo-random weight from a hash; a watcher belongs to the
live replica with the highest weight. Each replica computes this alone from the same inputs, and
a join or a leave moves only the watchers whose top replica changed: about 1/n of them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence


def weight(watcher_id: str, replica_id: str) -> int:
    """The pair's weight: the first 8 bytes of BLAKE2b over both ids (stable across processes)."""
    digest = hashlib.blake2b(f"{watcher_id}\x00{replica_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner(watcher_id: str, replicas: Sequence[str]) -> str | None:
    """The replica that should own ``watcher_id`` (ties broken by replica id); None when none."""
    if not replicas:
        return None
    return max(replicas, key=lambda replica: (weight(watcher_id, replica), replica))


def owned_by(replica_id: str, watcher_ids: Iterable[str], replicas: Sequence[str]) -> set[str]:
    """The watchers among ``watcher_ids`` that ``replica_id`` should own when ``replicas`` are live
    (all of them when it is the only one: no hashing, as a lone replica starts 10,000 at once)."""
    if list(replicas) == [replica_id]:
        return set(watcher_ids)
    return {w for w in watcher_ids if owner(w, replicas) == replica_id}
