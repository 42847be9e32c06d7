"""The in-process service fixture of tests/service, shared with the API tests."""

from tests.service.conftest import start_service

__all__ = ["start_service"]
