"""Fixtures of the relay tests: a webhook sink on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support import Sink


@pytest.fixture
async def sink() -> AsyncIterator[Sink]:
    """A webhook receiver that records every request (``statuses`` scripts its answers)."""
    server = Sink()
    await server.start()
    yield server
    await server.stop()
