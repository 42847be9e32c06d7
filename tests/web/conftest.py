"""The web page's tests reuse the in-process service fixture of tests/service."""

from __future__ import annotations

from tests.service.conftest import start_service

__all__ = ["start_service"]
