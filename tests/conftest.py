"""Shared fixtures: a project directory builder, a webhook sink, the tests' own redis-server."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

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


@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    """``redis://127.0.0.1:PORT`` of a redis-server the tests start on a free port for the whole
    session (never a server they did not start; each suite picks its own database)."""
    with running_redis() as url:
        yield url.rsplit("/", 1)[0]
