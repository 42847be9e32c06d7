"""A started Service for the MCP tests, and what both transports' tests share."""

from __future__ import annotations

import json
from typing import Any

from mcp_types import CallToolResult

from tests.service.conftest import start_service

__all__ = ["start_service"]

TOKEN = "mcp-test-token-0123456789"
WEBHOOK = """\
id: hook
strategy: webhook
conditions: [{path: level, op: eq, value: crit}]
fire: {eventName: crit_seen, priority: high}
deliveryTargets: [console]
"""
NEW_WATCHER = {
    "id": "made-by-mcp",
    "strategy": "webhook",
    "fire": {"eventName": "made", "operatorGoal": "tell on-call"},
    "deliveryTargets": ["console"],
    "tags": ["mcp"],
}
COMMAND_WATCHER = {
    "id": "probe",
    "strategy": "command",
    "command": ["true"],
    "intervalMs": 60000,
    "deliveryTargets": ["console"],
}
BASE_TOOLS = {
    "list_watchers",
    "get_watcher",
    "create_watcher",
    "set_watcher_enabled",
    "delete_watcher",
    "fire_watcher",
    "list_callbacks",
    "get_callback",
    "list_inbox",
    "ack_inbox_item",
    "resolve_inbox_item",
    "list_silences",
    "add_silence",
}


def server_settings(*, token: bool = True, approvals: bool = False) -> str:
    parts = ["host: 127.0.0.1", "port: 0"]
    if token:
        parts.append(f"apiToken: {TOKEN}")
    if approvals:
        parts.append("mcpApprovals: true")
    return "{" + ", ".join(parts) + "}"


def body_of(result: CallToolResult) -> Any:
    """The JSON a tool answered (its text content; the structured content must say the same)."""
    text = result.content[0].text  # type: ignore[union-attr]
    body = json.loads(text)
    assert body == result.structured_content
    return body
