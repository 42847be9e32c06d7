"""Recognise openclaw-sentinel JSON: one watcher, a list of them, its state file, or a tool call.

The plugin keeps its watchers in a state file (``~/.openclaw/sentinel-state.json``:
``{watchers: [...], runtime: {...}, updatedAt}``); its README creates them with the
``sentinel_control`` tool (``{action: "create", watcher: {...}}``); people also keep single
definitions or lists of them. Anything else is refused with a one-line reason.
"""

from __future__ import annotations

import json
from typing import Any

from sentinel_hooks.errors import SentinelError

EXPECTED = (
    "expected an openclaw-sentinel watcher ({id, strategy, endpoint, conditions, fire, …}), "
    "a list of them, its state file ({watchers: [...], runtime, updatedAt}) "
    'or a sentinel_control call ({action: "create", watcher: {...}})'
)


class NotOpenclawError(SentinelError):
    """The input is not JSON, or not JSON that openclaw-sentinel writes."""


def looks_like_watcher(value: Any) -> bool:
    """A JSON object with an ``id`` and a ``strategy``: upstream's two identifying keys."""
    return isinstance(value, dict) and "id" in value and "strategy" in value


def read_watchers(text: str, *, name: str) -> list[dict[str, Any]]:
    """The upstream watcher definitions in ``text`` (the file ``name``), in file order."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotOpenclawError(
            f"{name} is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); {EXPECTED}"
        ) from exc
    watchers = _watchers_of(data, name)
    if not watchers:
        raise NotOpenclawError(f"{name} holds no watchers (an empty list); nothing to import")
    return watchers


def _watchers_of(data: Any, name: str) -> list[dict[str, Any]]:
    if isinstance(data, list):
        return _list_of_watchers(data, name, "")
    if not isinstance(data, dict):
        raise NotOpenclawError(
            f"{name} holds a JSON {type(data).__name__}, not an object or list; {EXPECTED}"
        )
    if looks_like_watcher(data):
        return [data]
    if isinstance(data.get("watchers"), list):
        return _list_of_watchers(data["watchers"], name, "watchers")
    if data.get("action") in ("create", "add") and looks_like_watcher(data.get("watcher")):
        return [data["watcher"]]
    if "plugins" in data:
        raise NotOpenclawError(
            f"{name} looks like OpenClaw's own config (openclaw.json); the watchers are in "
            "Sentinel's state file, ~/.openclaw/sentinel-state.json by default"
        )
    keys = ", ".join(sorted(map(str, data))[:6]) or "none"
    raise NotOpenclawError(f"{name} is not openclaw-sentinel JSON (its keys: {keys}); {EXPECTED}")


def _list_of_watchers(items: list[Any], name: str, where: str) -> list[dict[str, Any]]:
    for index, item in enumerate(items):
        if not looks_like_watcher(item):
            raise NotOpenclawError(
                f"{name}: {where}[{index}] is not an openclaw-sentinel watcher (it needs id and strategy)"
            )
    return list(items)
