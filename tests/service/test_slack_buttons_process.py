"""Slack buttons end to end (SPEC §21): a real `sentinel run` process pages a Slack Web API stand-in
on 127.0.0.1 with buttons, and signed clicks are posted to it as Slack posts them.

Red team first: a viewer, a Slack user not in ``people``, a wrong signature, no signature, an old
timestamp and a body altered after signing each change nothing (inbox, audit, silences, feedback,
the Slack message). Then alice's Ack acks the fire as alice via slack, the message is updated in
place, and the same click delivered again changes nothing. The signing secret is never logged.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.api.slack_clicks import (
    SIGNING_SECRET,
    STRANGER,
    VIEWER_BOB,
    buttons,
    click_body,
    project,
    slack_headers,
)
from tests.cli.conftest import sentinel_command
from tests.delivery.slack_api import Posted, SlackApi, slack_api
from tests.service.test_api import call
from tests.service.test_process import free_port
from tests.support import wait_for

__all__ = ["slack_api"]

pytestmark = pytest.mark.slow

INTERACTIONS = "/hooks/slack/interactions"
Headers = dict[str, str] | None


class Process:
    """A `sentinel run` subprocess and an async client for its API (the stand-in shares the loop)."""

    def __init__(self, folder: Path, port: int) -> None:
        self.config = folder / "sentinel.yaml"
        self.url = f"http://127.0.0.1:{port}"
        self.log = folder / "service.log"
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
        with self.log.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                *sentinel_command(), "run", "-c", str(self.config), stdout=log, stderr=log, env=env
            )
        await wait_for(self.ready, timeout_s=20, what=f"the service to answer (log: {self.log})")

    async def ready(self) -> bool:
        assert self.proc is not None
        assert self.proc.returncode is None, self.log.read_text()
        try:
            return 200 == (await self.call("GET", "/readyz"))[0]
        except aiohttp.ClientError:
            return False

    async def call(
        self, method: str, path: str, *, body: Any = None, raw: bytes | None = None, headers: Headers = None
    ) -> tuple[int, Any]:
        return await call(self, method, path, body=body, raw=raw, headers=headers)

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            await asyncio.wait_for(self.proc.wait(), timeout=20)


@pytest.fixture
async def process(tmp_path: Path, slack_api: SlackApi) -> AsyncIterator[Process]:
    """`sentinel run` with people, a signing secret and the stand-in as its `ops` target."""
    port = free_port()
    project(tmp_path, slack_api.base(), port=port)
    running = Process(tmp_path, port)
    try:
        await running.start()
        yield running
    finally:
        await running.stop()


async def state(process: Process, callback_id: str, page: Posted) -> str:
    """Everything a click could change: inbox, audit, silences, the callback's feedback, the message."""
    seen: dict[str, Any] = {}
    for path in ("/api/v1/inbox", "/api/v1/audit", "/api/v1/silences", f"/api/v1/callbacks/{callback_id}"):
        seen[path] = (await process.call("GET", path))[1]
    seen["message"] = [page.blocks, page.updates]
    return json.dumps(seen, sort_keys=True)


async def test_signed_clicks_to_a_running_service(process: Process, slack_api: SlackApi) -> None:
    status, fired = await process.call("POST", "/api/v1/watchers/disk/fire", body={"payload": {"used": 97}})
    assert 202 == status
    callback_id = fired["callbackId"]

    def page() -> Posted | None:
        return next((m for m in slack_api.messages if m.callback_id == callback_id and buttons(m)), None)

    message = await wait_for(page, timeout_s=20, what="the page with its buttons")
    assert {"sentinel.ack", "sentinel.resolve", "sentinel.silence_1h"} <= set(buttons(message))
    before = await state(process, callback_id, message)

    ack = click_body(message, "sentinel.ack")
    altered = ack.replace(b"sentinel.ack", b"sentinel.resolve")
    refused = {
        "viewer": (click_body(message, "sentinel.ack", user=VIEWER_BOB), None),
        "stranger": (click_body(message, "sentinel.ack", user=STRANGER), None),
        "wrong signature": (ack, slack_headers(ack, secret="not-the-signing-secret")),
        "no signature": (ack, {"Content-Type": "application/x-www-form-urlencoded"}),
        "old timestamp": (ack, slack_headers(ack, at=time.time() - 301)),
        "altered body": (altered, slack_headers(ack)),
    }
    answers = {}
    for why, (body, headers) in refused.items():
        status, answer = await process.call(
            "POST", INTERACTIONS, raw=body, headers=headers or slack_headers(body)
        )
        answers[why] = (status, answer.get("text", "")[:11] if status == 200 else answer["error"]["code"])
    assert {
        "viewer": (200, "not allowed"),
        "stranger": (200, "not allowed"),
        "wrong signature": (401, "unauthorized"),
        "no signature": (401, "unauthorized"),
        "old timestamp": (401, "unauthorized"),
        "altered body": (401, "unauthorized"),
    } == answers
    assert before == await state(process, callback_id, message)
    told = [(user, text[:11]) for _, user, text in slack_api.ephemerals]
    assert [(VIEWER_BOB, "not allowed"), (STRANGER, "not allowed")] == told

    headers = slack_headers(ack)
    assert 200 == (await process.call("POST", INTERACTIONS, raw=ack, headers=headers))[0]
    items = (await process.call("GET", "/api/v1/inbox"))[1]["items"]
    audit = (await process.call("GET", "/api/v1/audit"))[1]["items"]
    assert [("acked", "alice", callback_id)] == [(i["status"], i["actor"], i["callbackId"]) for i in items]
    assert [("alice", "slack", "inbox.ack"), ("api", "api", "watcher.fire")] == [
        (e["actor"], e["via"], e["action"]) for e in audit
    ]
    assert (1, True) == (message.updates, "chat.update" in slack_api.calls)
    assert "✔ acked by alice at" in json.dumps(message.blocks, ensure_ascii=False)

    after = await state(process, callback_id, message)
    assert 200 == (await process.call("POST", INTERACTIONS, raw=ack, headers=headers))[0]  # replayed
    assert after == await state(process, callback_id, message)
    assert SIGNING_SECRET not in process.log.read_text()
