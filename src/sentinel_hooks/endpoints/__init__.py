"""The HTTP API, described once (SPEC.md §9): every endpoint's method, path, parameters, body and
answers, with pydantic models for the parameters, bodies and answers.

The faces read these declarations instead of describing the API again: ``api/`` registers one
aiohttp handler per endpoint and builds the OpenAPI document from them (``api/openapi.py``),
``mcp_server/`` makes each MCP tool from the endpoint it stands for (its arguments from the
endpoint's parameters and body, its request from its method and path). One module per area, as
``api/routes/``.
"""

from __future__ import annotations

from sentinel_hooks.endpoints import (
    audit,
    callbacks,
    inbox,
    ping,
    report,
    service,
    silences,
    slack,
    watchers,
)
from sentinel_hooks.endpoints.base import Endpoint

ENDPOINTS: tuple[Endpoint, ...] = (
    *service.ENDPOINTS,
    *watchers.ENDPOINTS,
    *ping.ENDPOINTS,
    *slack.ENDPOINTS,
    *callbacks.ENDPOINTS,
    *report.ENDPOINTS,
    *inbox.ENDPOINTS,
    *silences.ENDPOINTS,
    *audit.ENDPOINTS,
)
"""Every endpoint of the service, in the order the document lists them."""

__all__ = ["ENDPOINTS", "Endpoint"]
