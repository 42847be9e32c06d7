"""A slow agent, end to end (SPEC §6.4): the deadline pages people with the fallback, and the
agent's findings, minutes later in real life, arrive in the fallback's Slack thread.

The agent is an OpenAI-compatible server on 127.0.0.1 that holds its first answer (a tool call)
until the fallback is in the channel: well after the deadline. Slack is the Web API stand-in.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.delivery.targets.slack_threads import FINDINGS
from sentinel_hooks.relay.fallback import STILL_INVESTIGATING
from sentinel_hooks.service import Service
from tests.delivery.slack_api import DISK_WATCHER, SlackApi, slack_api
from tests.support import HeldModel, wait_for

__all__ = ["slack_api"]

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: 500
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
models:
  slow: {{type: openai, baseUrl: "{model_url}", model: slow-model, timeoutMs: 30000}}
defaultHookModel: slow
delivery: {{maxAttempts: 3, baseMs: 50, maxMs: 200, maxElapsedMs: 60000}}
targets:
  ops: {{type: slack, token: xoxb-test-token, channel: "#ops", apiBase: "{api}"}}
"""

WATCHER = DISK_WATCHER

FINDING = "db-1: /var/lib/postgres is full of WAL from a stuck replication slot; drop slot 'old_replica'."


@pytest.fixture
async def slow_model() -> AsyncIterator[HeldModel]:
    async with HeldModel() as server:
        yield server


async def test_the_fallback_pages_and_the_slow_agents_finding_follows_in_its_thread(
    tmp_path: Path, slack_api: SlackApi, slow_model: HeldModel
) -> None:
    """Root: the fallback with the "still investigating" line; then the agent's finding as a
    thread reply, and the root updated to ⚠️ fallback — agent findings in thread."""
    slow_model.reply_tool_call("sentinel_act", {"action": "notify", "message": FINDING}).reply_text("done")
    (tmp_path / "sentinel.yaml").write_text(CONFIG.format(model_url=slow_model.url, api=slack_api.base()))
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "disk.yaml").write_text(WATCHER)
    service = Service(load_config(tmp_path / "sentinel.yaml", environ={}))
    await service.start()
    try:
        outcome = await service.manager.ingest("disk", {"used": 97})
        assert outcome.contract is not None
        await wait_for(lambda: slow_model.held.is_set() or None, what="the agent's first model call")
        [root] = await wait_for(lambda: slack_api.roots() or None, what="the fallback in the channel")
        assert ("fallback", STILL_INVESTIGATING) == (root.kind, root.text.splitlines()[-1])
        slow_model.answer.set()  # the agent answers now, well after the 0.5 s deadline
        [reply] = await wait_for(lambda: slack_api.replies(root) or None, what="the finding in the thread")
        assert (FINDING, "notify") == (reply.text, reply.kind)
        await wait_for(lambda: root.updates or None, what="the root updated")
        assert root.text.startswith(f"{FINDINGS} — Sentinel: disk_full fired on disk (high)")
        [only_root] = slack_api.roots()
        current = await service.store.get_contract(outcome.contract.callback_id)
        assert current is not None
        assert ("fallback_sent", root.ts) == (current.state, only_root.ts)
    finally:
        slow_model.answer.set()
        await service.stop()
