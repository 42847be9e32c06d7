"""The throwaway Sentinel project a run uses: sentinel.yaml with one ``webhook`` target, the sink.

``notificationPayloadMode: none`` so the only deliveries are fallbacks; ``allowedHosts``
names 127.0.0.1 (an IP literal there lets the safe-HTTP layer reach a loopback sink); the
API listens on a free port. Every other key keeps its default, the dedupe window included.
"""

from __future__ import annotations

import json
from pathlib import Path

TARGET = "sink"


def write_project(
    folder: Path, *, store: str, sink_port: int, timeout_ms: int, secret: str | None = None
) -> Path:
    """Write ``folder/sentinel.yaml`` (and an empty watchers folder); its path."""
    (folder / "watchers").mkdir(parents=True, exist_ok=True)
    target: dict[str, object] = {"type": "webhook", "url": f"http://127.0.0.1:{sink_port}/hook"}
    if secret is not None:
        target["secret"] = secret
    lines = [
        f"store: {json.dumps(store)}",
        'server: {host: "127.0.0.1", port: 0}',
        'allowedHosts: ["127.0.0.1"]',
        f"hookResponseTimeoutMs: {timeout_ms}",
        "hookResponseFallbackMode: concise",
        "notificationPayloadMode: none",
        f"targets: {{{TARGET}: {json.dumps(target)}}}",
    ]
    path = folder / "sentinel.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def sqlite_url(folder: Path) -> str:
    """An absolute sqlite store URL for a database file in ``folder``."""
    return f"sqlite:///{(folder / 'state.db').resolve()}"
