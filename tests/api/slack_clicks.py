"""Signed Slack button clicks, made the way Slack makes them (SPEC §21): a form with one ``payload``
field, ``X-Slack-Request-Timestamp`` and ``X-Slack-Signature: v0=<hex HMAC-SHA256 of
v0:{timestamp}:{raw body}>``. Written here with hmac, not slack_sdk, so the tests check the scheme
itself."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from tests.delivery.slack_api import DISK_WATCHER, Posted

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
ALICE, VIEWER_BOB, STRANGER = "U0ALICE01", "U0BOB0002", "U0NOBODY9"
PEOPLE = (
    f"people: {{alice: {{slack: {ALICE}, role: operator}}, bob: {{slack: {VIEWER_BOB}, role: viewer}}}}\n"
)
SLACK = f"slack: {{signingSecret: {SIGNING_SECRET}}}\n"
FORM = "application/x-www-form-urlencoded"
CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: {port}}}
allowedHosts: ["127.0.0.1"]
hookResponseDedupeWindowMs: 0
delivery: {{maxAttempts: 3, baseMs: 50, maxMs: 200, maxElapsedMs: 60000}}
targets:
  ops: {{type: slack, token: xoxb-test-token, channel: "#ops", apiBase: "{api}"}}
"""
WATCHER = DISK_WATCHER


def project(folder: Path, api: str, *, port: int = 0, buttons: bool = True, watcher: str = WATCHER) -> Path:
    """Write a project whose ``ops`` Slack target posts to ``api`` (the stand-in) and whose
    ``disk`` watcher pages it; with ``buttons``, alice (operator) and bob (viewer) in ``people``
    and a signing secret. Its sentinel.yaml."""
    config = folder / "sentinel.yaml"
    config.write_text(CONFIG.format(api=api, port=port) + (PEOPLE + SLACK if buttons else ""))
    (folder / "watchers").mkdir(exist_ok=True)
    (folder / "watchers" / "disk.yaml").write_text(watcher)
    return config


def buttons(message: Posted) -> dict[str, str]:
    """The message's Sentinel buttons: action id → value."""
    return {
        element["action_id"]: element["value"]
        for block in message.blocks
        if block.get("type") == "actions"
        for element in block["elements"]
    }


def block_id(message: Posted) -> str:
    [found] = [b["block_id"] for b in message.blocks if b.get("type") == "actions"]
    return str(found)


def click_body(message: Posted, action_id: str, user: str = ALICE) -> bytes:
    """The form Slack posts when ``user`` clicks ``action_id`` on ``message``."""
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower()},
        "container": {"type": "message", "message_ts": message.ts, "channel_id": message.channel},
        "channel": {"id": message.channel},
        "message": {"ts": message.ts, "text": message.text, "blocks": message.blocks},
        "response_url": "https://hooks.slack.com/actions/T0/1/xyz",
        "actions": [
            {
                "action_id": action_id,
                "block_id": block_id(message),
                "value": buttons(message)[action_id],
                "type": "button",
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
    return urlencode({"payload": json.dumps(payload)}).encode()


def slack_headers(body: bytes, *, at: float | None = None, secret: str = SIGNING_SECRET) -> dict[str, str]:
    """Slack's headers for ``body`` signed at ``at`` (now by default)."""
    timestamp = str(int(time.time() if at is None else at))
    base = f"v0:{timestamp}:".encode() + body
    signature = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"Content-Type": FORM, "X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": signature}
