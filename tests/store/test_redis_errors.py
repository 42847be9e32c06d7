"""The one translation of redis-py's exceptions (``store.redis.errors.translated``) that the store
and the cluster share: what becomes ``StoreUnavailable``, what ``StoreError``, and what passes."""

from __future__ import annotations

import asyncio

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sentinel_hooks.cluster.connection import bounded
from sentinel_hooks.errors import StoreError, StoreUnavailable
from sentinel_hooks.store.redis.errors import translated

WHERE = "redis store redis://:***@127.0.0.1:6399/0"


@pytest.mark.parametrize(
    "raised",
    [
        RedisConnectionError("Connection refused"),
        RedisTimeoutError("Timeout reading from socket"),
        OSError("Network is unreachable"),
        OutOfMemoryError("command not allowed when used memory > 'maxmemory'"),
        ResponseError("READONLY You can't write against a read only replica."),
        ResponseError("Error running script: MISCONF Redis is configured to save RDB snapshots"),
    ],
)
async def test_a_server_out_of_reach_or_taking_no_writes_is_unavailable(raised: Exception) -> None:
    """Connection trouble and a server refusing writes for now: StoreUnavailable, naming the server."""
    with pytest.raises(
        StoreUnavailable, match=r"^redis store redis://:\*\*\*@127\.0\.0\.1:6399/0: ping failed"
    ):
        async with translated(WHERE, "ping", timeout_s=1):
            raise raised


async def test_any_other_refusal_is_a_store_error() -> None:
    """A command the server refuses for good is StoreError, not StoreUnavailable."""
    with pytest.raises(StoreError) as caught:
        async with translated(WHERE, "append transcript", timeout_s=1):
            raise ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")
    assert (StoreError, True) == (
        type(caught.value),
        str(caught.value).startswith(f"{WHERE}: append transcript failed: WRONGTYPE"),
    )


async def test_no_answer_in_time_is_unavailable() -> None:
    """A block that outlives ``timeout_s`` is StoreUnavailable saying how long it waited."""
    with pytest.raises(StoreUnavailable, match=r"ping got no answer within 0\.01 s"):
        async with translated(WHERE, "ping", timeout_s=0.01):
            await asyncio.Event().wait()


async def test_the_cluster_translates_alike_naming_its_server_without_the_password() -> None:
    """``cluster.connection.bounded`` is the same translation, its messages naming the cluster's
    server with the password redacted."""
    with pytest.raises(StoreUnavailable) as caught:
        async with bounded("redis://:hunter2@127.0.0.1:6399/11", "renew leases", timeout_s=1):
            raise OutOfMemoryError("command not allowed when used memory > 'maxmemory'")
    assert str(caught.value).startswith("cluster redis redis://:***@127.0.0.1:6399/11: renew leases failed")


async def test_cancellation_passes_through() -> None:
    """A task cancelled inside the block is cancelled, not turned into a store error."""
    started = asyncio.Event()

    async def wait() -> None:
        async with translated(WHERE, "read", timeout_s=60):
            started.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(wait())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
