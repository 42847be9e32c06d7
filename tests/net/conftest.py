"""Fixtures for the safe HTTP client tests."""

from __future__ import annotations

from tests.net.servers import datagrams, open_http, serve

__all__ = ["datagrams", "open_http", "serve"]
