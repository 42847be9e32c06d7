"""`redis-pubsub` and `redis-stream` against a real Redis on 127.0.0.1 (db 15, unique keys per test).

What every strategy does (observe, fail retryably, end a stream when the connection is lost, let
go when cancelled) is in tests/contract/test_strategies.py; this is what these two add.

Skipped when no server answers locally; failed when ``CI`` is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import pytest
import redis
import redis.asyncio

from sentinel_hooks.clock import FakeClock
from sentinel_hooks.config.service import LimitsSpec
from sentinel_hooks.config.watcher import WATCHER_ADAPTER, RedisPubSubWatcher, RedisStreamWatcher
from sentinel_hooks.watchers.strategies import redis_pubsub, redis_source, redis_stream
from sentinel_hooks.watchers.strategies.redis_pubsub import RedisPubSub
from sentinel_hooks.watchers.strategies.redis_stream import RedisStreamReader
from sentinel_hooks.watchers.strategy import Observed, ObserveError, StrategyContext

pytestmark = pytest.mark.redis

WAIT_S = 5.0


@pytest.fixture
def prefix() -> str:
    """A key and channel prefix no other test uses."""
    return f"sentinel-test:{uuid.uuid4().hex}:"


@pytest.fixture
async def client(redis_url: str, prefix: str) -> AsyncIterator[redis.asyncio.Redis]:
    """A plain client for the test's own commands; deletes the test's keys afterwards."""
    plain = redis.asyncio.Redis.from_url(redis_url)
    yield plain
    keys = [key async for key in plain.scan_iter(match=f"{prefix}*")]
    if keys:
        await plain.delete(*keys)
    await plain.aclose()


def context() -> StrategyContext:
    return StrategyContext(http=cast(Any, None), clock=FakeClock(), limits=LimitsSpec(), base_dir=Path("."))


def watcher(redis_url: str, **keys: Any) -> Any:
    """A watcher model for the strategy in ``keys`` with a unique id."""
    return WATCHER_ADAPTER.validate_python(
        {"id": f"w-{uuid.uuid4().hex[:12]}", "redisUrl": redis_url, **keys}
    )


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Await ``check`` until it holds (bounded; for state another connection sets up)."""
    try:
        async with asyncio.timeout(WAIT_S):
            while True:
                if await check():
                    return
                await asyncio.sleep(0.01)
    except TimeoutError:
        pytest.fail(f"{what} (waited {WAIT_S} s)")


# -- redis-pubsub ------------------------------------------------------------------------------


def pubsub(redis_url: str, channel: str) -> RedisPubSub:
    spec = watcher(redis_url, strategy="redis-pubsub", channel=channel)
    return redis_pubsub.create(cast(RedisPubSubWatcher, spec), context())


async def publish_until_heard(client: redis.asyncio.Redis, channel: str, data: str) -> None:
    """Publish ``data`` until a subscriber receives it (the strategy subscribes asynchronously)."""
    await until(lambda: _published(client, channel, data), f"nobody subscribed to {channel}")


async def _published(client: redis.asyncio.Redis, channel: str, data: str) -> bool:
    return int(await client.publish(channel, data)) > 0


async def first_message(
    strategy: RedisPubSub, client: redis.asyncio.Redis, channel: str, data: str
) -> Observed:
    """The first observation of ``strategy`` after ``data`` is published on ``channel``."""
    stream = strategy.stream()
    receiving = asyncio.ensure_future(anext(stream))
    try:
        await publish_until_heard(client, channel, data)
        return await receiving
    finally:
        await cast(Any, stream).aclose()


async def test_pubsub_json_message_is_observed_parsed(
    redis_url: str, client: redis.asyncio.Redis, prefix: str
) -> None:
    """A published JSON message is observed as its JSON value."""
    channel = f"{prefix}prices"
    observed = await first_message(pubsub(redis_url, channel), client, channel, '{"eth": {"usd": 1999.5}}')
    assert {"eth": {"usd": 1999.5}} == observed.value


async def test_pubsub_plain_text_is_observed_as_text(
    redis_url: str, client: redis.asyncio.Redis, prefix: str
) -> None:
    """A message that is not JSON is observed as {"text": message}."""
    channel = f"{prefix}log"
    observed = await first_message(pubsub(redis_url, channel), client, channel, "disk almost full")
    assert {"text": "disk almost full"} == observed.value


async def test_pubsub_glob_channel_subscribes_to_the_pattern(
    redis_url: str, client: redis.asyncio.Redis, prefix: str
) -> None:
    """A channel with glob characters is a pattern: messages on matching channels arrive."""
    observed = await first_message(
        pubsub(redis_url, f"{prefix}orders.*"), client, f"{prefix}orders.eu", "[1, 2]"
    )
    assert [1, 2] == observed.value


def test_only_glob_characters_make_a_pattern() -> None:
    """*, ? and [ make a pattern; other punctuation does not."""
    names = ["a.*", "a?", "a[12]", "plain:name-1.x"]
    assert [True, True, True, False] == [redis_pubsub.is_pattern(name) for name in names]


async def test_pubsub_unreachable_server_raises_observe_error_without_password() -> None:
    """A server that cannot be reached is a retryable ObserveError with the password masked."""
    strategy = pubsub("redis://:hunter2@127.0.0.1:1/0", "ch")
    with pytest.raises(ObserveError) as caught:
        await anext(strategy.stream())
    assert ("hunter2" in str(caught.value), "127.0.0.1:1" in str(caught.value)) == (False, True)


async def test_pubsub_cancel_closes_the_connection(
    redis_url: str, client: redis.asyncio.Redis, prefix: str
) -> None:
    """Cancelling the consuming task closes the subscription's connection."""
    channel = f"{prefix}quiet"
    strategy = pubsub(redis_url, channel)
    stream = strategy.stream()
    receiving = asyncio.ensure_future(anext(stream))
    await until(lambda: _subscribers(client, channel, 1), "the strategy never subscribed")
    receiving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await receiving
    await until(lambda: _subscribers(client, channel, 0), "the subscription stayed open")


async def test_pubsub_a_dropped_connection_is_not_reopened_behind_the_error(
    redis_url: str, client: redis.asyncio.Redis, prefix: str
) -> None:
    """When the server drops a subscription, the error reaches the strategy with no connection
    reopened: redis-py 8 would reconnect and subscribe again before raising, and that zombie
    subscriber took the messages meant for the next stream until it was closed."""
    channel, name = f"{prefix}dropped", f"sentinel:w-{uuid.uuid4().hex[:12]}"
    opened = redis_source.open_client(redis_url, watcher_id=name.removeprefix("sentinel:"))
    subscription = opened.pubsub()
    try:
        await subscription.subscribe(channel)
        assert (await subscription.get_message(timeout=WAIT_S) or {}).get("type") == "subscribe"
        killed = await client.client_kill_filter(_id=(await _named(client, name))[0])
        with pytest.raises(redis.ConnectionError):
            await subscription.get_message(timeout=WAIT_S)
        left = (await _named(client, name), await _subscribers(client, channel, 0))
    finally:
        await subscription.aclose()  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
        await opened.aclose()
    assert (1, [], True) == (killed, *left)


async def _named(client: redis.asyncio.Redis, name: str) -> list[str]:
    """The ids of the connections named ``name``."""
    return [info["id"] for info in await client.client_list() if info.get("name") == name]


async def test_pubsub_idle_ping_keeps_a_healthy_subscription(
    redis_url: str, client: redis.asyncio.Redis, prefix: str
) -> None:
    """After an idle spell the strategy PINGs; the answer keeps the subscription going."""
    channel = f"{prefix}idle"
    spec = watcher(redis_url, strategy="redis-pubsub", channel=channel)
    strategy = RedisPubSub(cast(RedisPubSubWatcher, spec), context(), idle_ping_s=0.05)
    stream = strategy.stream()
    receiving = asyncio.ensure_future(anext(stream))
    try:
        await until(lambda: _last_command(client, spec.id, "ping"), "the idle subscription never sent PING")
        await publish_until_heard(client, channel, '{"after": "ping"}')
        assert {"after": "ping"} == (await receiving).value
    finally:
        await cast(Any, stream).aclose()


async def _last_command(client: redis.asyncio.Redis, watcher_id: str, command: str) -> bool:
    infos = await client.client_list()
    return any(i.get("name") == f"sentinel:{watcher_id}" and i.get("cmd") == command for i in infos)


class FakeRedis:
    """Just enough of a Redis server for SUBSCRIBE: OK to setup commands, pings counted.

    ``answer_ping`` False: PING is never answered (a peer that vanished without closing).
    """

    def __init__(self, *, answer_ping: bool) -> None:
        self.answer_ping = answer_ping
        self.pings = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while header := await reader.readline():
                parts = [await self._bulk(reader) for _ in range(int(header[1:]))]
                writer.write(self._answer(parts))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()

    def _answer(self, parts: list[bytes]) -> bytes:
        name = parts[0].upper()
        if name == b"SUBSCRIBE":
            return b"*3\r\n$9\r\nsubscribe\r\n$%d\r\n%s\r\n:1\r\n" % (len(parts[1]), parts[1])
        if name == b"PING":
            self.pings += 1
            return b"*2\r\n$4\r\npong\r\n$0\r\n\r\n" if self.answer_ping else b""
        return b"+OK\r\n"

    @staticmethod
    async def _bulk(reader: asyncio.StreamReader) -> bytes:
        size = int((await reader.readline())[1:])
        return (await reader.readexactly(size + 2))[:-2]


@pytest.fixture
async def fake_redis_url() -> AsyncIterator[Callable[[FakeRedis], Awaitable[str]]]:
    """Serve a FakeRedis on 127.0.0.1; its redis:// URL. Closed after the test."""
    servers: list[asyncio.Server] = []

    async def start(fake: FakeRedis) -> str:
        server = await asyncio.start_server(fake.handle, "127.0.0.1", 0)
        servers.append(server)
        return f"redis://127.0.0.1:{server.sockets[0].getsockname()[1]}/0"

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


def idle_pinging(url: str) -> RedisPubSub:
    spec = watcher(url, strategy="redis-pubsub", channel="ch")
    return RedisPubSub(cast(RedisPubSubWatcher, spec), context(), idle_ping_s=0.05)


async def test_pubsub_silent_server_raises_observe_error(
    fake_redis_url: Callable[[FakeRedis], Awaitable[str]],
) -> None:
    """A server that stops answering (PING unanswered) ends the stream with an ObserveError."""
    strategy = idle_pinging(await fake_redis_url(FakeRedis(answer_ping=False)))
    with pytest.raises(ObserveError, match=r"no answer to PING within 0\.05 s"):
        async with asyncio.timeout(WAIT_S):
            await anext(strategy.stream())


async def test_pubsub_answered_pings_keep_the_stream_open(
    fake_redis_url: Callable[[FakeRedis], Awaitable[str]],
) -> None:
    """Every answered PING re-arms the check: a quiet but healthy server is never dropped."""
    fake = FakeRedis(answer_ping=True)
    stream = idle_pinging(await fake_redis_url(fake)).stream()
    receiving = asyncio.ensure_future(anext(stream))
    await until(lambda: _at_least(fake, 3), "the strategy stopped pinging")
    still_open = not receiving.done()
    receiving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await receiving
    assert still_open


async def _at_least(fake: FakeRedis, pings: int) -> bool:
    return fake.pings >= pings


async def _subscribers(client: redis.asyncio.Redis, channel: str, expected: int) -> bool:
    counts = await client.pubsub_numsub(channel)
    return expected == int(counts[0][1])


# -- redis-stream ------------------------------------------------------------------------------


def reader(redis_url: str, stream: str, *, consumer: str = "c1", **options: Any) -> RedisStreamReader:
    spec = watcher(redis_url, strategy="redis-stream", stream=stream, group="g1")
    return RedisStreamReader(cast(RedisStreamWatcher, spec), context(), consumer=consumer, **options)


async def take(strategy: RedisStreamReader, count: int) -> list[Observed]:
    """The first ``count`` observations of a fresh ``stream()``; the stream is closed afterwards."""
    stream = strategy.stream()
    try:
        async with asyncio.timeout(WAIT_S):
            return [await anext(stream) for _ in range(count)]
    finally:
        await cast(Any, stream).aclose()


async def pending(client: redis.asyncio.Redis, stream: str) -> int:
    return int((await client.xpending(stream, "g1"))["pending"])


@pytest.fixture
async def stream_key(client: redis.asyncio.Redis, prefix: str) -> str:
    """A stream with group g1 already created at 0 (so entries added now are read)."""
    key = f"{prefix}jobs"
    await client.xgroup_create(key, "g1", id="0", mkstream=True)
    return key


def test_stream_consumer_is_named_for_this_process(redis_url: str) -> None:
    """The reader's consumer name is sentinel-<host>-<pid>, so a restarted process is a new consumer."""
    spec = watcher(redis_url, strategy="redis-stream", stream="s")
    strategy = redis_stream.create(cast(RedisStreamWatcher, spec), context())
    assert strategy.consumer.endswith(f"-{os.getpid()}")


async def test_stream_entries_are_observed(
    redis_url: str, client: redis.asyncio.Redis, stream_key: str
) -> None:
    """A JSON data field is observed parsed; any other entry as its field map."""
    await client.xadd(stream_key, {"data": '{"job": 7, "state": "failed"}'})
    await client.xadd(stream_key, {"job": "8", "state": "ok"})
    await client.xadd(stream_key, {"payload": "not json"})
    observed = await take(reader(redis_url, stream_key), 3)
    expected = [{"job": 7, "state": "failed"}, {"job": "8", "state": "ok"}, {"payload": "not json"}]
    assert expected == [o.value for o in observed]


async def test_stream_creates_its_group_at_the_end_of_the_stream(
    redis_url: str, client: redis.asyncio.Redis, prefix: str
) -> None:
    """Without a group one is created (MKSTREAM, at $): only entries added afterwards are read."""
    key = f"{prefix}fresh"
    strategy = reader(redis_url, key)
    stream = strategy.stream()
    receiving = asyncio.ensure_future(anext(stream))
    try:
        await until(lambda: _has_group(client, key), "the group was never created")
        await client.xadd(key, {"data": '"after"'})
        assert "after" == (await receiving).value
    finally:
        await cast(Any, stream).aclose()


async def _has_group(client: redis.asyncio.Redis, key: str) -> bool:
    try:
        return any(g["name"] == b"g1" for g in await client.xinfo_groups(key))
    except redis.ResponseError:
        return False


async def test_stream_entry_is_acked_only_when_ack_is_awaited(
    redis_url: str, client: redis.asyncio.Redis, stream_key: str
) -> None:
    """Reading leaves the entry pending; awaiting Observed.ack acknowledges it."""
    await client.xadd(stream_key, {"data": "1"})
    strategy = reader(redis_url, stream_key)
    stream = strategy.stream()
    observed = await anext(stream)
    before = await pending(client, stream_key)
    assert observed.ack is not None
    await observed.ack()
    after = await pending(client, stream_key)
    await cast(Any, stream).aclose()
    assert (1, 0) == (before, after)


async def test_unacked_entry_is_redelivered_to_the_same_consumer(
    redis_url: str, client: redis.asyncio.Redis, stream_key: str
) -> None:
    """An entry read but never acked (a crash) comes again first to a new reader with that name."""
    await client.xadd(stream_key, {"data": '{"n": 1}'})
    await take(reader(redis_url, stream_key, consumer="c-same"), 1)
    await client.xadd(stream_key, {"data": '{"n": 2}'})
    observed = await take(reader(redis_url, stream_key, consumer="c-same"), 2)
    assert [{"n": 1}, {"n": 2}] == [o.value for o in observed]


async def test_acked_entry_is_not_redelivered(
    redis_url: str, client: redis.asyncio.Redis, stream_key: str
) -> None:
    """Once acked an entry is done: the next reader sees only later entries."""
    await client.xadd(stream_key, {"data": '{"n": 1}'})
    (first,) = await take(reader(redis_url, stream_key), 1)
    assert first.ack is not None
    await first.ack()
    await client.xadd(stream_key, {"data": '{"n": 2}'})
    (second,) = await take(reader(redis_url, stream_key), 1)
    assert {"n": 2} == second.value


async def test_ack_after_the_stream_closed_still_acknowledges(
    redis_url: str, client: redis.asyncio.Redis, stream_key: str
) -> None:
    """An observation stored after its stream ended (shutdown, reconnect) can still be acked."""
    await client.xadd(stream_key, {"data": "1"})
    (observed,) = await take(reader(redis_url, stream_key), 1)
    assert observed.ack is not None
    await observed.ack()
    assert 0 == await pending(client, stream_key)


async def test_entries_abandoned_by_a_dead_consumer_are_claimed(
    redis_url: str, client: redis.asyncio.Redis, stream_key: str
) -> None:
    """Entries another consumer left pending past the idle time are claimed and delivered."""
    await client.xadd(stream_key, {"data": '"orphan"'})
    await take(reader(redis_url, stream_key, consumer="dead"), 1)
    (observed,) = await take(reader(redis_url, stream_key, consumer="alive", claim_idle_ms=0), 1)
    assert "orphan" == observed.value


async def test_entries_of_a_live_consumer_are_left_alone(
    redis_url: str, client: redis.asyncio.Redis, stream_key: str
) -> None:
    """Entries pending for less than the idle time stay with their consumer."""
    await client.xadd(stream_key, {"data": '"busy"'})
    await take(reader(redis_url, stream_key, consumer="busy"), 1)
    await client.xadd(stream_key, {"data": '"new"'})
    (observed,) = await take(reader(redis_url, stream_key, consumer="other"), 1)
    assert "new" == observed.value


async def test_pending_entry_deleted_from_the_stream_is_acked_and_skipped(
    redis_url: str, client: redis.asyncio.Redis, stream_key: str
) -> None:
    """A pending entry that no longer exists is acknowledged instead of observed."""
    gone = await client.xadd(stream_key, {"data": '"gone"'})
    await take(reader(redis_url, stream_key), 1)
    await client.xdel(stream_key, gone)
    await client.xadd(stream_key, {"data": '"next"'})
    (observed,) = await take(reader(redis_url, stream_key), 1)
    assert ("next", 1) == (observed.value, await pending(client, stream_key))


def test_single_payload_field_with_json_is_the_value() -> None:
    """data/json/payload holding JSON is parsed; the same field with other fields is not."""
    values = [
        redis_stream.entry_value({b"json": b"[1]"}),
        redis_stream.entry_value({b"data": b"1", b"extra": b"x"}),
        redis_stream.entry_value({b"body": b"{}"}),
    ]
    assert [[1], {"data": "1", "extra": "x"}, {"body": "{}"}] == values


async def test_clients_leave_deadlines_to_asyncio_timeout() -> None:
    """No socket_timeout: redis-py would then send through wait_for, which loses cancels on 3.11."""
    client = redis_source.open_client("redis://127.0.0.1/15", watcher_id="w")
    timeout = client.connection_pool.connection_kwargs.get("socket_timeout")
    await client.aclose()
    assert timeout is None


async def test_cancelling_a_reader_at_any_point_stops_it(
    redis_url: str, client: redis.asyncio.Redis, stream_key: str
) -> None:
    """Whichever command a reader is in when cancelled (setup, pending, blocked), it stops promptly."""
    strategy = reader(redis_url, stream_key)
    stuck: list[int] = []
    for steps in range(40):
        task = asyncio.ensure_future(anext(strategy.stream()))
        for _ in range(steps):
            await asyncio.sleep(0)  # let the reader reach a different await point each round
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=WAIT_S)
        if not done:
            stuck.append(steps)
            await _abandon(task)
            break
    assert [] == stuck


async def _abandon(task: asyncio.Future[Any]) -> None:
    """Cancel a stuck reader again and give it a bounded time to go (the test fails anyway)."""
    task.cancel()
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(task, WAIT_S + 1)
