"""A store that stops taking writes: /readyz says so, and the watchers it starves show ``failing``.

Real faults only. SQLite: ``sentinel run`` as a process whose file-size limit (RLIMIT_FSIZE, what a
full disk looks like to SQLite: every write fails, reads go on) is lowered under it; unlike a chmod,
that stops writes when the tests run as root. Redis: the test's own redis-server, first refusing
writes (``maxmemory`` below what it holds: PING and reads still answer), then stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import resource
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio

from sentinel_hooks.api.routes.health import STORE_NOT_WRITABLE
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from tests.cli.conftest import sentinel_command
from tests.redis_server import free_port, running_redis
from tests.support import Endpoint, wait_for

POLLED = """\
id: probe
strategy: http-poll
endpoint: "{url}"
intervalMs: 200
conditions: [{{path: status, op: eq, value: down}}]
deliveryTargets: [console]
"""

PUSHED = """\
id: pushed
strategy: webhook
conditions: [{path: status, op: eq, value: down}]
deliveryTargets: [console]
"""


async def call(url: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session:
        kwargs: dict[str, Any] = {} if body is None else {"json": body}
        async with session.request(method, url, **kwargs) as response:
            return response.status, await response.json()


async def status_of(base: str, watcher_id: str) -> dict[str, Any]:
    code, body = await call(f"{base}/api/v1/watchers/{watcher_id}")
    assert 200 == code, body
    status: dict[str, Any] = body["status"]
    return status


class Process:
    """``sentinel run`` on a project in ``folder``; its log is read from a pipe (a log file would hit
    the file-size limit the test sets)."""

    def __init__(self, folder: Path, port: int) -> None:
        self.folder = folder
        self.url = f"http://127.0.0.1:{port}"
        self.proc: asyncio.subprocess.Process | None = None
        self.lines: list[str] = []
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
        self.proc = await asyncio.create_subprocess_exec(
            *sentinel_command(),
            *("run", "-c", str(self.folder / "sentinel.yaml")),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        self._reader = asyncio.get_running_loop().create_task(self._read())
        await wait_for(self.ready, timeout_s=20, what=f"the service to be ready: {self.log()}")

    async def _read(self) -> None:
        assert self.proc is not None
        assert self.proc.stderr is not None
        async for line in self.proc.stderr:
            self.lines.append(line.decode(errors="replace"))

    def log(self) -> str:
        return "".join(self.lines[-40:])

    async def logged(self, text: str) -> str | None:
        """The first log line holding ``text`` (None while there is none)."""
        return next((line for line in self.lines if text in line), None)

    async def ready(self) -> bool:
        assert self.proc is not None
        assert self.proc.returncode is None, self.log()
        with contextlib.suppress(aiohttp.ClientError):
            return 200 == (await call(self.url + "/readyz"))[0]
        return False

    def limit_file_size(self, size: int) -> None:
        """Set the process's RLIMIT_FSIZE soft limit (bytes; ``RLIM_INFINITY`` lifts it)."""
        assert self.proc is not None
        _, hard = resource.prlimit(self.proc.pid, resource.RLIMIT_FSIZE)
        resource.prlimit(self.proc.pid, resource.RLIMIT_FSIZE, (size, hard))

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), timeout=15)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self._reader is not None:
            await self._reader


@pytest.fixture
async def endpoint() -> AsyncIterator[Endpoint]:
    server = Endpoint()
    await server.start()
    yield server
    await server.stop()


@pytest.mark.slow
async def test_sqlite_that_cannot_write_is_not_ready_and_its_watcher_is_failing(
    tmp_path: Path, endpoint: Endpoint
) -> None:
    """A full disk under SQLite: /readyz 503 with a fixed text (no path: it needs no auth) and the
    cause in the log once, the polled watcher ``failing`` with the store in its lastError; both
    recover when writes succeed again, and the log says so."""
    port = free_port()
    (tmp_path / "sentinel.yaml").write_text(
        "store: sqlite:///state.db\n"
        f"server: {{host: 127.0.0.1, port: {port}}}\n"
        'allowedHosts: ["127.0.0.1"]\n'
        "limits: {minIntervalMs: 100, requestTimeoutMs: 2000}\n"
        "targets: {console: {type: console}}\n"
    )
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "probe.yaml").write_text(POLLED.format(url=endpoint.url()))
    service = Process(tmp_path, port)
    try:
        await service.start()
        await wait_for(lambda: endpoint.requests >= 2, what="a few polls")
        assert "ok" == (await status_of(service.url, "probe"))["state"]

        service.limit_file_size(1)  # no file of the process may grow: SQLite's writes fail
        message = await wait_for(lambda: _not_ready(service.url), what="/readyz to answer 503")
        assert STORE_NOT_WRITABLE == message
        assert STORE_NOT_WRITABLE == await _not_ready(service.url)
        cause = await wait_for(lambda: service.logged("does not take writes"), what="the cause logged")
        assert str(tmp_path / "state.db") in cause

        async def failing() -> dict[str, Any] | None:
            status = await status_of(service.url, "probe")
            return status if status["state"] == "failing" else None

        status = await wait_for(failing, what="the watcher to show the store failure")
        assert "sqlite store" in status["lastError"]

        service.limit_file_size(resource.RLIM_INFINITY)
        await wait_for(service.ready, what="ready again once writes succeed")
        await wait_for(lambda: _state_is(service.url, "probe", "ok"), what="the watcher to recover")
        await wait_for(lambda: service.logged("takes writes again"), what="the recovery logged")
        messages = [json.loads(line)["message"] for line in service.lines if line.startswith("{")]
        assert_logged_once_per_cause([m for m in messages if "does not take writes" in m])
    finally:
        if service.proc is not None:
            service.limit_file_size(resource.RLIM_INFINITY)
        await service.stop()


async def _not_ready(base: str) -> str | None:
    """The message of a 503 from /readyz (None while it answers 200)."""
    code, body = await call(base + "/readyz")
    if code == 200:
        return None
    assert 503 == code, body
    message: str = body["error"]["message"]
    return message


async def _state_is(base: str, watcher_id: str, state: str) -> bool:
    return state == (await status_of(base, watcher_id))["state"]


@contextlib.asynccontextmanager
async def redis_service(tmp_path: Path, url: str) -> AsyncIterator[Service]:
    """An in-process Service on the Redis at ``url`` with the ``pushed`` webhook watcher."""
    (tmp_path / "sentinel.yaml").write_text(
        f"store: {url}\n"
        "server: {host: 127.0.0.1, port: 0}\n"
        "targets: {console: {type: console}}\n"
        "cluster: {leaseMs: 1000}\n"
    )
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "pushed.yaml").write_text(textwrap.dedent(PUSHED))
    service = Service(load_config(tmp_path / "sentinel.yaml", environ={}), state_dir=tmp_path)
    await service.start()
    try:
        yield service
    finally:
        await service.stop()


async def push(service: Service, value: dict[str, Any]) -> tuple[int, Any]:
    return await call(f"{service.url}/hooks/ingest/pushed", "POST", value)


@pytest.mark.redis
async def test_redis_refusing_writes_is_not_ready_and_the_watcher_is_failing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis over its maxmemory answers PING and reads but refuses writes: /readyz 503, a pushed
    event 503 and the watcher ``failing`` naming the store; lifting the limit recovers both."""
    with running_redis() as url:
        admin = redis.asyncio.Redis.from_url(url)
        try:
            async with redis_service(tmp_path, url) as service:
                assert (202, {"accepted": True, "fired": False}) == await push(service, {"status": "up"})
                await admin.config_set("maxmemory", 1)  # noeviction (the default): writes refused
                message = await wait_for(lambda: _not_ready(service.url), what="/readyz to answer 503")
                assert STORE_NOT_WRITABLE == message
                assert "redis store" in _store_cause(caplog)
                assert 503 == (await push(service, {"status": "down"}))[0]
                status = await status_of(service.url, "pushed")
                assert ("failing", True) == (status["state"], "redis store" in status["lastError"])

                await admin.config_set("maxmemory", 0)
                await wait_for(lambda: _ready(service), what="ready again")
                assert (202, {"accepted": True, "fired": True}) == await push(service, {"status": "down"})
                assert "ok" == (await status_of(service.url, "pushed"))["state"]
        finally:
            await admin.aclose()


def _store_cause(caplog: pytest.LogCaptureFixture) -> str:
    """The write check's one log line naming why the store takes no writes."""
    lines = [r.getMessage() for r in caplog.records if "does not take writes" in r.getMessage()]
    assert_logged_once_per_cause(lines)
    return lines[0]


def assert_logged_once_per_cause(lines: list[str]) -> None:
    """At least one line, and no cause logged twice in a row (the store is probed many times)."""
    assert lines
    assert all(a != b for a, b in itertools.pairwise(lines)), lines


async def _ready(service: Service) -> bool:
    return 200 == (await call(service.url + "/readyz"))[0]


@pytest.mark.redis
async def test_redis_stopped_is_not_ready_and_the_watcher_is_failing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The Redis server goes away: /readyz 503 and a pushed event leaves the watcher ``failing``."""
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(running_redis())
        async with redis_service(tmp_path, url) as service:
            assert 202 == (await push(service, {"status": "up"}))[0]
            stack.close()  # the redis-server is terminated
            message = await wait_for(lambda: _not_ready(service.url), what="/readyz to answer 503")
            assert STORE_NOT_WRITABLE == message
            assert "redis store" in _store_cause(caplog)
            assert 503 == (await push(service, {"status": "down"}))[0]
            status = await status_of(service.url, "pushed")
            assert ("failing", True) == (status["state"], "redis store" in status["lastError"])
