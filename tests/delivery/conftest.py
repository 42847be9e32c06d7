"""Fixtures for target tests: the safe HTTP client, real local sinks, and a target context."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from sentinel_hooks.clock import FakeClock
from sentinel_hooks.config.targets import TargetSpec
from sentinel_hooks.delivery.targets.base import Message, Target, TargetContext, create_target
from sentinel_hooks.net.client import SafeHttp
from tests.delivery.sinks import sink, slack
from tests.net.servers import datagrams

__all__ = ["datagrams", "sink", "slack"]  # fixtures of sinks.py and net/servers.py, for the tests here

SPECS: TypeAdapter[TargetSpec] = TypeAdapter(TargetSpec)
MakeTarget = Callable[..., Target]


def message(**changes: Any) -> Message:
    """A typical notification; ``changes`` override fields."""
    fields: dict[str, Any] = {
        "callback_id": "01JCALLBACK",
        "watcher_id": "eth-gas",
        "event_name": "gas_high",
        "priority": "high",
        "kind": "notify",
        "text": "Gas is 182 gwei (over 150).",
    }
    return Message(**(fields | changes))


def new_http(**overrides: Any) -> SafeHttp:
    """The SafeHttp the target tests use: 127.0.0.1 listed as a literal, 1 MiB, 5 s."""
    options: dict[str, Any] = {
        "allowed_hosts": ["127.0.0.1"],
        "allow_private_networks": False,
        "max_response_bytes": 1 << 20,
        "request_timeout_s": 5,
    }
    return SafeHttp(**(options | overrides))


@pytest.fixture
async def http() -> AsyncIterator[SafeHttp]:
    """A started SafeHttp, closed after the test."""
    async with new_http() as client:
        yield client


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def console() -> io.StringIO:
    return io.StringIO()


@pytest.fixture
def context(http: SafeHttp, clock: FakeClock, tmp_path: Path, console: io.StringIO) -> TargetContext:
    return TargetContext(http=http, clock=clock, base_dir=tmp_path, console=console)


@pytest.fixture
def make_target(context: TargetContext) -> MakeTarget:
    """Build a target from its sentinel.yaml form (camelCase keys), named ``name``."""

    def make(spec: dict[str, Any], *, name: str = "t", ctx: TargetContext | None = None) -> Target:
        return create_target(name, SPECS.validate_python(spec), ctx or context)

    return make
