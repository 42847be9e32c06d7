"""The Redis store's client and its registered scripts.

Kept apart from ``store.py`` (as ``sqlite/worker.py`` is from ``sqlite/store.py``): this is the
only place that knows how to connect; every command runs inside ``translated`` (``errors``), so
``redis.RedisError`` leaves as Sentinel's ``StoreError`` naming the server, password redacted.

``new_client`` makes every Redis client of the process (the store's, the cluster's, the Redis
watchers'): each has a bounded pool that makes a command wait for a free connection instead
of failing with "Too many connections" (redis-py's default pool raises at 100).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

import hiredis
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

from sentinel_hooks.errors import StoreError, StoreUnavailable
from sentinel_hooks.store.redis import groups, pacing, retention
from sentinel_hooks.store.redis import scripts as lua
from sentinel_hooks.store.redis.errors import translated
from sentinel_hooks.store.urls import redacted_url


def as_text(value: bytes | str) -> str:
    """A reply as ``str`` (the client decodes responses; this only satisfies the types)."""
    return value.decode() if isinstance(value, bytes) else value


def new_client(
    url: str,
    *,
    name: str,
    max_connections: int,
    connect_timeout_s: float = 5.0,
    decode_responses: bool = True,
) -> Redis:
    """A lazily connecting client for ``url`` with at most ``max_connections`` connections.

    A command that finds them all in use waits for one; callers bound every command (the wait
    included) with ``asyncio.timeout``, never with redis-py's ``socket_timeout``, which reads
    through ``asyncio.wait_for`` and on Python 3.11 can swallow a cancellation. The client never
    retries by itself: a command re-sent after a lost reply could apply twice, so retrying is
    the caller's decision, and neither does it reconnect when a command fails: redis-py 8 calls
    its retry's error handler even with no retries left, and a subscription's handler opens a
    new connection and subscribes it again before the error is raised (a zombie subscriber
    that, until the caller closes it, takes messages meant for the caller's next subscription).
    ``name`` is the connections' CLIENT SETNAME (CLIENT LIST shows whose
    they are). Raises ``ValueError`` for a malformed URL. Closing the client closes its pool.
    """
    pool = BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=None,  # the wait is bounded by the caller's asyncio.timeout
        decode_responses=decode_responses,
        client_name=name,
        socket_connect_timeout=connect_timeout_s,
        socket_timeout=None,  # redis-py 8 defaults to 5 s, which brings its wait_for back
        socket_keepalive=True,
        retry=Retry(NoBackoff(), 0, supported_errors=()),  # no retry and no reconnect on an error
        **_checked_connections(),
    )
    pool.connection_class = _packing_in_c(pool.connection_class)
    return Redis.from_pool(pool)


def _packing_in_c(kind: type[AbstractConnection]) -> type[AbstractConnection]:
    """``kind`` (a plain, TLS or Unix socket connection, as the URL chose) with its commands
    packed by hiredis's C packer. redis-py's asyncio connections pack each argument in Python (its
    synchronous ones use hiredis): a tenth of a storm's CPU on Redis, whose every alert's script
    call carries some thirty arguments. The bytes are the same; an argument hiredis cannot pack
    (a bool, None) goes to redis-py's packer, which refuses it with its own error."""

    class PackedInC(kind):  # type: ignore[valid-type,misc]  # a subclass of the class chosen
        def pack_command(self, *args: Any) -> list[bytes]:
            first = args[0]
            if " " in first if isinstance(first, str) else b" " in first:  # "CONFIG GET": words apart
                return super().pack_command(*args)  # type: ignore[no-any-return]
            try:
                return [hiredis.pack_command(args)]
            except TypeError:
                return super().pack_command(*args)  # type: ignore[no-any-return]

    PackedInC.__name__ = PackedInC.__qualname__ = f"{kind.__name__}PackedInC"
    return PackedInC


def _checked_connections() -> dict[str, Any]:
    """Pool options under which the pool checks a connection before lending it.

    With maintenance notifications on (redis-py 8's default) the pool skips that check and lends
    connections the server has closed: after a Redis restart, each connection idle in a pool
    failed its next command ("Connection closed by server"), a session not queued, an API call
    answered 503. Older redis-py has no such notifications and always checks."""
    if not hasattr(BlockingConnectionPool, "maint_notifications_enabled"):
        return {}
    from redis.maint_notifications import MaintNotificationsConfig

    return {"maint_notifications_config": MaintNotificationsConfig(enabled=False)}


class Scripts:
    """The Lua scripts, registered once per client (EVALSHA, reloaded if the server forgot)."""

    def __init__(self, client: Redis) -> None:
        self.settle_contracts = client.register_script(lua.SETTLE_CONTRACTS)
        self.claim = client.register_script(lua.CLAIM)
        self.range = client.register_script(lua.RANGE)
        self.accept_contract = client.register_script(lua.ACCEPT_CONTRACT)
        self.create_inbox_item = client.register_script(lua.CREATE_INBOX_ITEM)
        self.transition_inbox_item = client.register_script(lua.TRANSITION_INBOX_ITEM)
        self.enqueue_delivery = client.register_script(lua.ENQUEUE_DELIVERY)
        self.update_deliveries = client.register_script(lua.UPDATE_DELIVERIES)
        self.record_outcomes = client.register_script(lua.RECORD_OUTCOMES)
        self.begin_notify = client.register_script(lua.BEGIN_NOTIFY)
        self.contract_step = client.register_script(lua.CONTRACT_STEP)
        self.resolve_contract = client.register_script(lua.RESOLVE_CONTRACT)
        self.append_transcript = client.register_script(retention.APPEND_TRANSCRIPT)
        self.write_watcher_batch = client.register_script(lua.WRITE_WATCHER_BATCH)
        self.trigger_priorities = client.register_script(lua.TRIGGER_PRIORITIES)
        self.read_transcript = client.register_script(retention.READ_TRANSCRIPT)
        self.read_callback = client.register_script(retention.READ_CALLBACK)
        self.prune_contracts = client.register_script(retention.PRUNE_CONTRACTS)
        self.prune_inbox = client.register_script(retention.PRUNE_INBOX)
        self.prune_sessions = client.register_script(retention.PRUNE_SESSIONS)
        self.take_pace_slot = client.register_script(pacing.TAKE_PACE_SLOT)
        self.claim_joins = client.register_script(groups.CLAIM_JOINS)
        self.joins_reported = client.register_script(groups.JOINS_REPORTED)
        self.member_resolved = client.register_script(groups.MEMBER_RESOLVED)
        self.join_members = client.register_script(groups.JOIN_MEMBERS)


class RedisConnection:
    """A client for ``url`` once ``start`` has run.

    Replies are decoded to ``str``; connecting and each command time out after ``timeout_s``;
    the client never retries by itself (redis-py would by default), because a command re-sent
    after a lost reply could apply twice (a transcript append, a settle reported as lost).
    At most ``max_connections`` are open; under a burst a command waits for a free one (within
    the same ``timeout_s``) instead of failing with "Too many connections".
    """

    def __init__(self, url: str, *, timeout_s: float = 5.0, max_connections: int = 64) -> None:
        self.url = url
        self.name = f"redis store {redacted_url(url)}"
        self._timeout_s = timeout_s
        self._max_connections = max_connections
        self._client: Redis | None = None
        self._scripts: Scripts | None = None

    @property
    def client(self) -> Redis:
        """The client; ``StoreUnavailable`` before ``start`` or after ``stop``."""
        if self._client is None:
            raise StoreUnavailable(f"{self.name} is not open; call `await store.open()` first")
        return self._client

    @property
    def scripts(self) -> Scripts:
        """The registered scripts; ``StoreUnavailable`` when not started."""
        if self._scripts is None:
            raise StoreUnavailable(f"{self.name} is not open; call `await store.open()` first")
        return self._scripts

    def translated(self, what: str) -> AbstractAsyncContextManager[None]:
        """Re-raise Redis failures inside the block as Sentinel's store errors, bounded by
        ``timeout_s`` (``errors.translated``)."""
        return translated(self.name, what, timeout_s=self._timeout_s)

    async def failure(self, what: str, exc: Exception) -> StoreError:
        """``exc`` (a reply of a pipelined command) as the store error ``translated`` makes of it."""
        try:
            async with self.translated(what):
                raise exc
        except StoreError as error:
            return error
        return StoreError(
            f"{self.name}: {what} failed: {exc}"
        )  # pragma: no cover  (translated always raises)

    async def run(self, what: str, script: AsyncScript, keys: list[str], args: list[Any]) -> Any:
        """Run a registered script with translated errors; its raw reply."""
        async with self.translated(what):
            return await script(keys=keys, args=args)

    async def run_pipelined(
        self, what: str, script: AsyncScript, calls: list[tuple[list[str], list[Any]]]
    ) -> list[Any]:
        """Run ``script`` once per ``(keys, args)`` in one pipelined round trip (``evalsha_each``);
        each call's raw reply or its error (``failure``), in order."""
        async with self.translated(what):
            replies = await evalsha_each(self.client, script, calls)
        return [await self.failure(what, r) if isinstance(r, Exception) else r for r in replies]

    async def start(self) -> None:
        """Connect, check the server answers (PING), register the scripts; idempotent."""
        if self._client is not None:
            return
        try:
            client = new_client(
                self.url,
                name="sentinel-store",
                max_connections=self._max_connections,
                connect_timeout_s=self._timeout_s,
            )
        except ValueError as exc:
            raise StoreUnavailable(f"{self.name}: invalid URL ({exc})") from exc
        try:
            async with self.translated("connect"):
                await client.ping()
        except StoreError:
            await client.aclose()
            raise
        self._client, self._scripts = client, Scripts(client)

    async def stop(self) -> None:
        """Close the connection pool; idempotent."""
        client, self._client, self._scripts = self._client, None, None
        if client is not None:
            async with self.translated("close"):
                await client.aclose()


async def evalsha_each(
    client: Redis, script: AsyncScript, calls: list[tuple[list[str], list[Any]]]
) -> list[Any]:
    """Run ``script`` once per ``(keys, args)`` in one pipeline (no MULTI); each call's reply or
    the error it got, in order.

    Sent as plain EVALSHA: redis-py's ``Script`` on a pipeline asks SCRIPT EXISTS first, one more
    round trip on every batch. Calls the server answers NOSCRIPT (it restarted or was flushed
    since the script was registered) are run again, once, after SCRIPT LOAD: a NOSCRIPT call ran
    nothing, so the retry cannot apply twice."""
    replies = await _evalsha_all(client, script, calls)
    missing = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
    if missing:
        script.sha = await client.script_load(script.script)
        again = await _evalsha_all(client, script, [calls[i] for i in missing])
        for i, reply in zip(missing, again, strict=True):
            replies[i] = reply
    return replies


async def _evalsha_all(
    client: Redis, script: AsyncScript, calls: list[tuple[list[str], list[Any]]]
) -> list[Any]:
    """EVALSHA of each call in one pipeline; replies and errors as they came."""
    async with client.pipeline(transaction=False) as pipe:
        for keys, args in calls:
            pipe.evalsha(script.sha, len(keys), *keys, *args)
        return list(await pipe.execute(raise_on_error=False))
