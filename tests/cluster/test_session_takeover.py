"""Hook sessions across two in-process Services on one Redis: a session cut off on one replica is
finished by the other from its checkpoint, and an approval decided on one replica resumes a
session paused on the other."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.callbacks.queues.stream import StreamSessionQueue
from sentinel_hooks.callbacks.sessions.progress import progress_key
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from sentinel_hooks.store.records import Contract
from sentinel_hooks.store.shortcuts import get_checkpoint
from sentinel_hooks.testing import FakeOpenAIServer
from tests.cluster.conftest import LEASE_MS, stop_all
from tests.support import wait_for

pytestmark = pytest.mark.redis

CONFIG = """\
store: {store}
server: {{host: 127.0.0.1, port: 0}}
cluster: {{leaseMs: {lease_ms}}}
hookResponseTimeoutMs: 60000
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
models:
  local: {{type: openai, baseUrl: "{model}", model: m, timeoutMs: 60000}}
targets: {{out: {{type: file, path: out.jsonl}}}}
actionPolicy:
  default: needs_approval
  rules: [{{id: sh-ok, priority: 1, decision: auto, conditions: [{{path: args, op: contains, value: auto}}]}}]
"""


class Project:
    """Services started on one project directory and one Redis."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.started: list[Service] = []

    async def start(self) -> Service:
        service = Service(load_config(self.root / "sentinel.yaml", environ={}))
        self.started.append(service)
        await service.start()
        return service

    def notified(self) -> list[str]:
        out = self.root / "out.jsonl"
        lines = out.read_text().splitlines() if out.exists() else []
        records = [json.loads(line) for line in lines]
        # one entry per Idempotency-Key: the dispatcher may send one delivery twice under its key
        by_key = {r["idempotencyKey"]: r["message"] for r in records if r["kind"] == "notify"}
        return list(by_key.values())


@pytest.fixture
async def project(tmp_path: Path, redis_url: str, model: FakeOpenAIServer) -> AsyncIterator[Project]:
    (tmp_path / "sentinel.yaml").write_text(
        CONFIG.format(store=redis_url, lease_ms=LEASE_MS, model=model.url)
    )
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "w.yaml").write_text("id: w\nstrategy: webhook\ndeliveryTargets: [out]\n")
    made = Project(tmp_path)
    yield made
    await stop_all(made.started)


def queue(service: Service) -> StreamSessionQueue:
    assert isinstance(service.sessions.queue, StreamSessionQueue)
    return service.sessions.queue


async def fire(service: Service) -> Contract:
    outcome = await service.manager.ingest("w", {"n": 1})
    assert outcome.contract is not None
    return outcome.contract


async def status(service: Service, contract: Contract) -> Any:
    progress = await get_checkpoint(service.store, progress_key(contract.callback_id)) or {}
    return progress.get("status")


async def tool_results(service: Service, contract: Contract) -> list[dict[str, Any]]:
    entries = await service.store.get_transcript(contract.session_key)
    messages = [
        e.entry.get("message") or {} for e in entries if e.entry.get("callbackId") == contract.callback_id
    ]
    return [m for m in messages if m.get("role") == "tool"]


async def test_a_session_cut_off_on_one_replica_is_finished_by_another_from_its_checkpoint(
    project: Project, model: FakeOpenAIServer
) -> None:
    """A's session ran its command, then A stopped dead; B reclaims it and does not run it again."""
    ran = project.root / "ran.txt"
    model.reply_tool_call(
        "sentinel_act",
        {"action": "run_command", "command": "sh", "args": ["-c", f"echo once >> {ran}", "auto"]},
    )
    model.hang()
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": "checked, all fine"})
    a = await project.start()
    contract = await fire(a)
    await wait_for(lambda: len(model.requests) == 2, what="A's session to wait on the model")
    await queue(a).halt()
    assert ["once"] == ran.read_text().split()

    b = await project.start()
    await wait_for(
        lambda: _is(status(b, contract), "done"),
        timeout_s=4 * LEASE_MS / 1000 + 10,
        what="B to finish the session",
    )
    assert ["once"] == ran.read_text().split()
    assert ["checked, all fine"] == project.notified()
    assert 2 == len(await tool_results(b, contract))  # run_command once (on A), notify once (on B)
    # the queue notes the outcome after the session's last step is stored (status "done" above)
    await wait_for(lambda: contract.callback_id in queue(b).finished, what="B's queue to note it")
    assert {contract.callback_id: "done"} == queue(b).finished


async def test_an_approval_decided_on_another_replica_resumes_the_paused_session(
    project: Project, model: FakeOpenAIServer
) -> None:
    """Paused on A for an approval; approved through B: the command runs once and the session ends."""
    ran = project.root / "ran.txt"
    model.reply_tool_call(
        "sentinel_act", {"action": "run_command", "command": "sh", "args": ["-c", f"echo approved >> {ran}"]}
    )
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": "done after approval"})
    a = await project.start()
    contract = await fire(a)
    await wait_for(lambda: queue(a).finished.get(contract.callback_id) == "paused", what="the pause on A")
    b = await project.start()
    [item] = (await b.store.list_inbox(kind="approval", status="open")).items
    await b.inbox.approve(item.id, actor="bob")
    await wait_for(lambda: project.notified(), timeout_s=10, what="the notify after the approval")
    await wait_for(lambda: _is(status(b, contract), "done"), what="the session to end")
    assert ["approved"] == ran.read_text().split()
    assert ["done after approval"] == project.notified()
    results = [json.loads(m["content"]) for m in await tool_results(b, contract)]
    assert "approved" == results[0]["approval"]["status"]


async def _is(value: Any, expected: str) -> bool:
    return await value == expected
