"""Shared fixtures: a project directory builder, a webhook sink, a store in memory, the tests' own
redis-server and a clean database of it."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import redis

from sentinel_hooks.store.sqlite import SqliteStore
from sentinel_hooks.testing import FakeOpenAIServer
from tests.redis_server import running_redis
from tests.support import Sink

BASE_CONFIG = """\
allowedHosts: [api.example.com, "*.example.org"]
models:
  rules: {type: scripted}
targets:
  oncall: {type: console}
  log: {type: file, path: out.jsonl}
"""

Writer = Callable[..., Path]


@pytest.fixture
def project(tmp_path: Path) -> Writer:
    """Write sentinel.yaml and other files into a temp project; return the config path.

    ``watchers__a_yaml="…"`` writes ``watchers/a.yaml`` (text dedented).
    """

    def write(config: str = BASE_CONFIG, **files: str) -> Path:
        (tmp_path / "sentinel.yaml").write_text(textwrap.dedent(config), encoding="utf-8")
        (tmp_path / "watchers").mkdir(exist_ok=True)
        for name, text in files.items():
            stem, _, suffix = name.replace("__", "/").rpartition("_")
            path = tmp_path / f"{stem}.{suffix}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text), encoding="utf-8")
        return tmp_path / "sentinel.yaml"

    return write


@pytest.fixture
async def sink() -> AsyncIterator[Sink]:
    """A webhook receiver on 127.0.0.1 that records every request (``statuses`` scripts its answers)."""
    server = Sink()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAIServer]:
    """A model server stand-in speaking OpenAI's API on 127.0.0.1, scripted by the test."""
    async with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
async def memory_store() -> AsyncIterator[SqliteStore]:
    """An open store in memory (what ``memory://`` opens: SQLite), closed after the test."""
    store = SqliteStore.in_memory()
    await store.open()
    yield store
    await store.close()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    """``redis://127.0.0.1:PORT`` of a redis-server the tests start on a free port for the whole
    session (never a server they did not start; each suite picks its own database)."""
    with running_redis() as url:
        yield url.rsplit("/", 1)[0]


@pytest.fixture
def redis_db() -> int:
    """The database of the tests' own redis-server that ``redis_url`` hands a test.

    15 unless a suite overrides this fixture to keep its own number, so that its keys never mix
    with another suite's even where a process it started may outlive a test (a service still
    stopping, a killed replica's last write): the cluster suite 11 (tests/cluster/conftest.py), the
    external callbacks 9, the relay's contract model 0, its crash test 14, the compose test 12,
    the ten-thousand-watcher load test 13, the kill -9 test of a session after its page 10.
    """
    return 15


@pytest.fixture
def redis_url(redis_server: str, redis_db: int) -> str:
    """``redis://127.0.0.1:PORT/N``: database ``redis_db`` of the tests' own redis-server, empty when
    the test starts. It is not emptied after the test (a service the test started may still be
    stopping then); the next test that asks for it empties it first."""
    url = f"{redis_server}/{redis_db}"
    with redis.Redis.from_url(url) as client:
        client.flushdb()  # ok-shared: the tests' own server
    return url
