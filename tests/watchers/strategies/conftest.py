"""Fixtures for the strategy wire tests: local servers, the safe HTTP client, a strategy context."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.clock import FakeClock
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import LimitsSpec
from sentinel_hooks.config.watcher import WATCHER_ADAPTER, AnyWatcher
from sentinel_hooks.net.client import SafeHttp
from sentinel_hooks.watchers.strategy import StrategyContext
from tests.net.servers import open_http, serve

__all__ = ["clock", "make_context", "open_http", "serve"]

MakeContext = Callable[..., StrategyContext]


@pytest.fixture
def clock() -> FakeClock:
    """The clock observations are stamped with."""
    return FakeClock()


@pytest.fixture
def make_context(clock: FakeClock, tmp_path: Path) -> MakeContext:
    """A StrategyContext around ``http`` with default limits (``redactor``/``limits`` overridable)."""

    def build(
        http: SafeHttp, *, redactor: Redactor | None = None, limits: LimitsSpec | None = None
    ) -> StrategyContext:
        return StrategyContext(
            http=http,
            clock=clock,
            limits=limits or LimitsSpec(),
            base_dir=tmp_path,
            redactor=redactor or Redactor(),
        )

    return build


def watcher(**keys: Any) -> AnyWatcher:
    """A watcher model from camelCase keys (id defaults to ``w``)."""
    return WATCHER_ADAPTER.validate_python({"id": "w", **keys})
