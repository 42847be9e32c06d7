"""A watcher validated by its strategy's model is reported as the discriminated union reports it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from sentinel_hooks.config.envvars import EnvText
from sentinel_hooks.config.issues import validation_issues
from sentinel_hooks.config.linemap import LineMap
from sentinel_hooks.config.loader import validate_watcher
from sentinel_hooks.config.watcher import WATCHER_ADAPTER, WatcherSpec
from sentinel_hooks.errors import ConfigIssue

HTTP = {"id": "w", "strategy": "http-poll", "endpoint": "https://api.example.com/x", "intervalMs": 1000}
CASES: list[dict[str, Any]] = [
    HTTP,
    {**HTTP, "intervalMs": "1000"},
    {**HTTP, "intervalMs": EnvText("1000")},
    {**HTTP, "schedule": "*/5 * * * *"},
    {**HTTP, "schedule": "61 * * * *", "timezone": "Mars/Base"},
    {**HTTP, "endpoint": "ftp://x", "methd": "GET", "matchh": "all", "enabled": "no"},
    {**HTTP, "conditions": [{"path": "a", "op": "gte ", "value": 1}, {"any": []}, {"all": [{"path": ""}]}]},
    {**HTTP, "fire": {"messageTemplate": "{{ nope }}", "priority": "urgent", "payloadTemplate": {"a": "${"}}},
    {**HTTP, "fire": {"eventNam": "x", "retry": 1}, "retry": {"maxRetries": -1, "baseMS": 1}},
    {**HTTP, "tags": "x", "expectEventWithinMs": 5, "headers": {"a": 1}},
    {"id": "w", "strategy": "webhook", "format": "alertmanager", "fire": {"trigger": "edge"}, "auth": "x"},
    {"id": "w", "strategy": "webhook", "secret": 5, "auth": "none", "includeHeaders": ["Authorization"]},
    {"id": "w", "strategy": "webhook", "auth": {"bearerToken": 3, "basic": {"usr": "a"}}},
    # a command watcher: test_command_watcher_errors_are_at_their_own_keys (the union misplaced them)
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


def _by_union(data: dict[str, Any]) -> tuple[Any, list[ConfigIssue]]:
    """What ``validate_watcher`` answered when every watcher went through the union."""
    try:
        return WATCHER_ADAPTER.validate_python(data).model_dump(), []
    except ValidationError as exc:
        lines = LineMap({(): 1})
        return None, validation_issues(exc, display="w.yaml", data=data, lines=lines, root=WatcherSpec)


@pytest.mark.parametrize("data", CASES, ids=[str(i) for i in range(len(CASES))])
def test_validation_by_strategy_reports_what_the_union_reports(data: dict[str, Any]) -> None:
    """Same watcher, or the same issues (line, key, message, hints), as through WatcherSpec."""
    watcher, issues = validate_watcher(
        data, display="w.yaml", lines=LineMap({(): 1}), service=None, skills={}, base_dir=Path(".")
    )
    assert _by_union(data) == (None if watcher is None else watcher.model_dump(), issues)


def test_command_watcher_errors_are_at_their_own_keys() -> None:
    """The union's tag ``command`` is also a key of a command watcher: no error is put under it."""
    data = {
        "id": "w",
        "strategy": "command",
        "command": [" "],
        "intervalMs": 0,
        "probe": {"stallThreshold": 0},
    }
    lines = LineMap({(): 1, ("command",): 3, ("intervalMs",): 4, ("probe", "stallThreshold"): 5})
    _, issues = validate_watcher(
        data, display="w.yaml", lines=lines, service=None, skills={}, base_dir=Path(".")
    )
    assert [(4, "intervalMs"), (3, "command"), (5, "probe.stallThreshold")] == [
        (i.line, i.key) for i in issues
    ]
