"""An in-process Service on a temp project, with a local endpoint to watch."""

from __future__ import annotations

import asyncio
import io
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from tests.support import Endpoint

SERVICE_CONFIG = """\
store: sqlite:///state.db
server: {server}
allowedHosts: {allowed}
hookResponseDedupeWindowMs: {dedupe}
limits: {{minIntervalMs: 100, maxResponseBytes: 4096, requestTimeoutMs: 2000{limits}}}
targets: {{console: {{type: console}}}}
{extra}
"""

Starter = Callable[..., Awaitable[Service]]


@pytest.fixture
async def endpoint() -> AsyncIterator[Endpoint]:
    server = Endpoint()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def start_service(tmp_path: Path) -> AsyncIterator[Starter]:
    """``await start_service(watchers={"a.yaml": "..."}, extra="...")`` → a started Service
    (``limits=", maxWatchers: 5"`` adds keys to ``limits``)."""
    started: list[Service] = []

    async def start(
        *,
        watchers: dict[str, str],
        extra: str = "",
        allowed: str = '["127.0.0.1"]',
        server: str = "{host: 127.0.0.1, port: 0}",
        dedupe: int = 0,
        store: str = "sqlite:///state.db",
        limits: str = "",
    ) -> Service:
        text = SERVICE_CONFIG.format(
            extra=extra, allowed=allowed, server=server, dedupe=dedupe, limits=limits
        )
        text = text.replace("sqlite:///state.db", store, 1)
        (tmp_path / "sentinel.yaml").write_text(text)
        folder = tmp_path / "watchers"
        folder.mkdir(exist_ok=True)
        for name, text in watchers.items():
            (folder / name).write_text(textwrap.dedent(text))
        service = Service(load_config(tmp_path / "sentinel.yaml", environ={}))
        await service.start()
        started.append(service)
        return service

    yield start
    for service in started:
        await stop_within(service)


STOP_WITHIN_S = 30.0


async def stop_within(service: Service) -> None:
    """Stop ``service``; a stop that hangs fails the test with every task's stack, instead of
    running into the suite's 60 s timeout with nothing to say what it waited for."""
    stopping = asyncio.ensure_future(service.stop())
    done, _ = await asyncio.wait({stopping}, timeout=STOP_WITHIN_S)
    if stopping in done:
        stopping.result()
        return
    stacks = io.StringIO()
    for task in asyncio.all_tasks():
        task.print_stack(file=stacks)
    stopping.cancel()
    pytest.fail(f"Service.stop() did not return within {STOP_WITHIN_S:g} s; tasks:\n{stacks.getvalue()}")
