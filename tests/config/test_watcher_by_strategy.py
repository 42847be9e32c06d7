"""A watcher validated by its strategy's model gives what the discriminated union gives."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sentinel_hooks.config.envvars import EnvText
from sentinel_hooks.config.watcher import WATCHER_ADAPTER, validate_watcher_data

HTTP = {"id": "w", "strategy": "http-poll", "endpoint": "https://api.example.com/x", "intervalMs": 1000}
CASES: list[dict[str, Any]] = [
    HTTP,
    {**HTTP, "intervalMs": "1000"},
    {**HTTP, "intervalMs": EnvText("1000")},
    {**HTTP, "schedule": "*/5 * * * *"},
    {**HTTP, "schedule": "61 * * * *", "timezone": "Mars/Base"},
    {**HTTP, "endpoint": "ftp://x", "methd": "GET", "enabled": "no"},
    {**HTTP, "conditions": [{"path": "a", "op": "gte ", "value": 1}, {"any": []}, {"all": [{"path": ""}]}]},
    {**HTTP, "fire": {"messageTemplate": "{{ nope }}", "priority": "urgent", "payloadTemplate": {"a": "${x}"}}},
    {**HTTP, "retry": {"maxRetries": -1}, "tags": "x", "expectEventWithinMs": 5},
    {"id": "w", "strategy": "webhook", "format": "alertmanager", "fire": {"trigger": "edge"}, "auth": "basic"},
    {"id": "w", "strategy": "webhook", "secret": "s", "auth": "none", "includeHeaders": ["Authorization"]},
    {"id": "w", "strategy": "command", "command": [" "], "intervalMs": 0, "probe": {"stallThreshold": 0}},
    {"id": "w", "strategy": "evm-call", "endpoint": "http://x", "intervalMs": 1, "evmCall": {"to": "0x1"}},
    {"id": "w", "strategy": "sse", "endpoint": "ws://x", "eventTypes": [1]},
    {"id": "w", "strategy": "websocket", "endpoint": "http://x"},
    {"id": "w", "strategy": "redis-stream", "redisUrl": "http://x", "stream": ""},
    {"id": "w", "strategy": "redis-pubsub", "redisUrl": "redis://x"},
    {"id": "w", "strategy": "http-long-poll"},
    {"id": "w", "strategy": "http-pol"},
    {"id": "w", "strategy": EnvText("http-poll"), "endpoint": "https://x", "intervalMs": 5},
    {"id": "w", "strategy": 3},
    {"id": "w"},
]


def _outcome(validate: Any, data: dict[str, Any]) -> Any:
    try:
        return ("ok", validate(data).model_dump())
    except ValidationError as exc:
        return ("errors", [(e["loc"], e["type"], e["msg"]) for e in exc.errors()])


def _untagged(outcome: Any, strategy: Any) -> Any:
    """The union's outcome without its tag at the head of each error's location."""
    kind, value = outcome
    if kind == "ok":
        return outcome
    return kind, [(loc[1:] if loc[:1] == (strategy,) else loc, t, m) for loc, t, m in value]


@pytest.mark.parametrize("data", CASES, ids=[str(i) for i in range(len(CASES))])
def test_direct_validation_equals_the_union(data: dict[str, Any]) -> None:
    """Same watcher or same errors (locations, types, messages) as WATCHER_ADAPTER."""
    expected = _untagged(_outcome(WATCHER_ADAPTER.validate_python, data), data.get("strategy"))
    assert expected == _outcome(validate_watcher_data, data)
