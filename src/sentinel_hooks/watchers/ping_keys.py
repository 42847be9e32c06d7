"""Heartbeat ping keys, found with the same work whether a key is known or not (SPEC.md §23).

The key in ``/hooks/ping/{pingKey}`` is the only secret of a ping. A lookup keyed by the key
itself would let a caller time how far a guess matches; instead each key is kept as its
HMAC-SHA256 under a secret made per process, the presented key is hashed the same way, the digest
looked up, and the found digest (or a stand-in of the same length for an unknown key) compared
with ``hmac.compare_digest``: one HMAC, one dict lookup and one comparison, always.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets


class PingKeys:
    """The ping keys of the heartbeat watchers this process runs, by digest."""

    __slots__ = ("_digests", "_ids", "_secret", "_stand_in")

    def __init__(self) -> None:
        self._secret = secrets.token_bytes(32)
        self._ids: dict[bytes, str] = {}
        self._digests: dict[str, bytes] = {}
        self._stand_in = secrets.token_bytes(32)  # compared against for an unknown key

    def _digest(self, key: str) -> bytes:
        return hmac.new(self._secret, key.encode("utf-8", "surrogateescape"), hashlib.sha256).digest()

    def add(self, watcher_id: str, key: str) -> None:
        """Watcher ``watcher_id`` takes pings to ``key`` (replacing its earlier key)."""
        self.remove(watcher_id)
        digest = self._digest(key)
        self._ids[digest] = watcher_id
        self._digests[watcher_id] = digest

    def remove(self, watcher_id: str) -> None:
        digest = self._digests.pop(watcher_id, None)
        if digest is not None and self._ids.get(digest) == watcher_id:
            del self._ids[digest]

    def find(self, key: str) -> str | None:
        """The id of the watcher whose key ``key`` is; None for an unknown key."""
        presented = self._digest(key)
        watcher_id = self._ids.get(presented)
        expected = self._digests.get(watcher_id, self._stand_in) if watcher_id else self._stand_in
        matched = hmac.compare_digest(presented, expected)
        return watcher_id if matched else None
