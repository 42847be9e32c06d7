"""Watcher leases on Redis: acquire, renew, release and check them, many at a time.

=================================  ======  ===============================================
key                                type    holds
=================================  ======  ===============================================
``<prefix>lease:<watcher>``        string  ``<replicaId>:<fencing token>``, with PX lease_ms
``<prefix>lease-token:<watcher>``  string  the last fencing token handed out (INCR; kept)
=================================  ======  ===============================================

Acquiring is ``SET NX PX`` with a token from ``INCR``, so each acquisition of a watcher gets a
larger token than any before it; the token counter is never deleted for that reason. Renewal and
release are compare-and-set in Lua: only the replica whose exact ``replica:token`` value is
stored may extend or delete the key, so a replica that paused past its lease cannot touch the
lease another replica now holds. ``holds`` asks the server who holds a lease; runners do not call
it per observation: the keeper answers their fencing check from its renewals (``keeper.py``).

Bulk operations run one Lua call per ``CHUNK`` watchers, all chunks in one pipeline: one round
trip for 10,000 watchers; replies list only the exceptions (leases lost, not released, taken).
Every key a script touches is passed in KEYS, but a watcher's lease and token keys hash to
different Redis Cluster slots: this targets a single Redis server (or a Sentinel-managed
primary), like the store.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from sentinel_hooks.cluster.connection import bounded, command_timeout_s, open_client
from sentinel_hooks.errors import StoreUnavailable
from sentinel_hooks.store.redis.connection import evalsha_each

CHUNK = 500

ACQUIRE = """
-- KEYS: n lease keys, then their n token keys | ARGV: lease ms, replica id
-- returns {position, token, ...} for the leases taken (held ones are skipped)
local n = #KEYS / 2
local out = {}
for i = 1, n do
  if redis.call('EXISTS', KEYS[i]) == 0 then
    local token = redis.call('INCR', KEYS[n + i])
    redis.call('SET', KEYS[i], ARGV[2] .. ':' .. token, 'NX', 'PX', ARGV[1])
    out[#out + 1] = i
    out[#out + 1] = token
  end
end
return out
"""

# Tokens travel as one space-separated argument and replies list only the exceptions (usually
# none): at 10,000 watchers, packing and parsing one value per key is most of the cost.
_EACH_HELD = """
local tokens = {}
for token in string.gmatch(ARGV[#ARGV], '%d+') do tokens[#tokens + 1] = token end
local function held(i) return redis.call('GET', KEYS[i]) == ARGV[#ARGV - 1] .. ':' .. tokens[i] end
"""

RENEW = (
    _EACH_HELD
    + """
-- KEYS: lease keys | ARGV: lease ms, replica id, tokens | returns the positions NOT renewed
local lost = {}
for i = 1, #KEYS do
  if held(i) then redis.call('PEXPIRE', KEYS[i], ARGV[1]) else lost[#lost + 1] = i end
end
return lost
"""
)

RELEASE = (
    _EACH_HELD
    + """
-- KEYS: lease keys | ARGV: replica id, tokens | returns the positions NOT deleted (not ours)
local kept = {}
for i = 1, #KEYS do
  if held(i) then redis.call('DEL', KEYS[i]) else kept[#kept + 1] = i end
end
return kept
"""
)

FREE = """
-- KEYS: lease keys | returns the positions of the keys that do not exist
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 0 then out[#out + 1] = i end
end
return out
"""


def _chunks(items: Sequence[str]) -> list[Sequence[str]]:
    return [items[start : start + CHUNK] for start in range(0, len(items), CHUNK)]


def _at_positions(chunks: list[Sequence[str]], replies: list[Any]) -> set[str]:
    """The ids at the 1-based positions each chunk's reply lists."""
    return {chunk[int(i) - 1] for chunk, reply in zip(chunks, replies, strict=True) for i in reply}


class Leases:
    """Lease operations for one replica (``replica_id``) on the server at ``redis_url``."""

    def __init__(self, redis_url: str, *, key_prefix: str = "sentinel:", replica_id: str, lease_ms: int):
        self.url = redis_url
        self.prefix = key_prefix
        self.replica_id = replica_id
        self.lease_ms = lease_ms
        self.timeout_s = command_timeout_s(lease_ms)  # the bound of each command
        self._client: Redis | None = None
        self._scripts: dict[str, AsyncScript] = {}

    def key(self, watcher_id: str) -> str:
        """The lease key of ``watcher_id``."""
        return f"{self.prefix}lease:{watcher_id}"

    def token_key(self, watcher_id: str) -> str:
        """The fencing-token counter of ``watcher_id``."""
        return f"{self.prefix}lease-token:{watcher_id}"

    def value(self, token: int) -> str:
        """What the lease key holds while this replica holds it with ``token``."""
        return f"{self.replica_id}:{token}"

    async def open(self) -> None:
        """Create the client (it connects on first use) and register the scripts; idempotent."""
        if self._client is None:
            client = open_client(self.url, "leases", name=f"sentinel-leases:{self.replica_id}")
            sources = {"acquire": ACQUIRE, "renew": RENEW, "release": RELEASE, "free": FREE}
            self._scripts = {name: client.register_script(source) for name, source in sources.items()}
            self._client = client

    async def close(self) -> None:
        """Close the client; idempotent."""
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.aclose()

    @property
    def client(self) -> Redis:
        """The open client; ``StoreUnavailable`` before ``open``."""
        if self._client is None:
            raise StoreUnavailable("cluster leases are not open; call `await leases.open()` first")
        return self._client

    async def acquire(self, watcher_ids: Iterable[str]) -> dict[str, int]:
        """Take the free leases among ``watcher_ids``: watcher id → its new fencing token."""
        chunks = _chunks(list(watcher_ids))
        args = [self.lease_ms, self.replica_id]
        calls = [([*map(self.key, chunk), *map(self.token_key, chunk)], args) for chunk in chunks]
        replies = await self._run("acquire", "acquire leases", calls)
        return {
            chunk[int(reply[i]) - 1]: int(reply[i + 1])
            for chunk, reply in zip(chunks, replies, strict=True)
            for i in range(0, len(reply), 2)
        }

    async def renew(self, held: Mapping[str, int], *, timeout_s: float | None = None) -> set[str]:
        """Extend the leases this replica still holds (watcher id → token); the ids renewed.

        ``timeout_s`` bounds it instead of ``self.timeout_s`` (the keeper waits for a late answer
        while the leases may still be valid)."""
        return set(held) - await self._each_held("renew", "renew leases", held, [self.lease_ms], timeout_s)

    async def release(self, held: Mapping[str, int]) -> set[str]:
        """Delete the leases this replica holds (watcher id → token); the ids actually released."""
        return set(held) - await self._each_held("release", "release leases", held, [])

    async def free(self, watcher_ids: Iterable[str]) -> set[str]:
        """The watchers among ``watcher_ids`` whose lease nobody holds."""
        chunks = _chunks(list(watcher_ids))
        replies = await self._run("free", "check leases", [([*map(self.key, c)], []) for c in chunks])
        return _at_positions(chunks, replies)

    async def _each_held(
        self, script: str, what: str, held: Mapping[str, int], args: list[Any], timeout_s: float | None = None
    ) -> set[str]:
        """Run a compare-and-set ``script`` over ``held``; the ids whose lease was not ours."""
        chunks = _chunks(list(held))
        calls = [
            ([*map(self.key, chunk)], [*args, self.replica_id, " ".join(str(held[w]) for w in chunk)])
            for chunk in chunks
        ]
        return _at_positions(chunks, await self._run(script, what, calls, timeout_s))

    async def holder(self, watcher_id: str) -> tuple[str, int] | None:
        """Who holds ``watcher_id``'s lease now: (replica id, token), or None when it is free."""
        async with bounded(self.url, "read a lease", timeout_s=self.timeout_s):
            value = await self.client.get(self.key(watcher_id))
        if value is None:
            return None
        replica, _, token = str(value).rpartition(":")
        return replica, int(token)

    async def holds(self, watcher_id: str, token: int) -> bool:
        """Does this replica hold ``watcher_id`` with ``token`` on the server, right now? (one GET)"""
        async with bounded(self.url, "check a lease", timeout_s=self.timeout_s):
            value = await self.client.get(self.key(watcher_id))
        return value == self.value(token)

    async def _run(
        self, script: str, what: str, calls: list[tuple[list[str], list[Any]]], timeout_s: float | None = None
    ) -> list[Any]:
        """Run ``script`` once per (keys, args) call, all in one pipeline; the replies in order."""
        if not calls:
            return []
        async with bounded(self.url, what, timeout_s=timeout_s or self.timeout_s):
            replies = await evalsha_each(self.client, self._scripts[script], calls)
            failed = next((reply for reply in replies if isinstance(reply, Exception)), None)
            if failed is not None:
                raise failed
        return replies
