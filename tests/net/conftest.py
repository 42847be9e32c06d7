"""Fixtures for the safe HTTP client tests."""

from __future__ import annotations

from tests.net.servers import open_http, serve

__all__ = ["open_http", "serve"]
