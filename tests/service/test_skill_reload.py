"""SIGHUP re-reads skills: in a `sentinel run` process, sessions started after it get the new SKILL.md."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.testing import FakeOpenAIServer
from tests.service.test_process import Running, free_port
from tests.support import wait_for

pytestmark = pytest.mark.slow

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: {port}}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: 60000
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
models:
  local: {{type: openai, baseUrl: "{model_url}", model: small-model, timeoutMs: 5000}}
targets: {{console: {{type: console}}}}
"""

WATCHER = """\
id: vault
strategy: webhook
skillId: vaults
deliveryTargets: [console]
"""

SKILL = """\
---
name: vaults
description: How to read a vault's health.
---
{body}
"""


@pytest.fixture
def service(tmp_path: Path, model: FakeOpenAIServer) -> Iterator[Running]:
    port = free_port()
    (tmp_path / "sentinel.yaml").write_text(CONFIG.format(port=port, model_url=model.url))
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "vault.yaml").write_text(WATCHER)
    write_skill(tmp_path, "Health below 1.1 means liquidation is near.")
    running = Running(tmp_path / "sentinel.yaml", port)
    yield running
    if running.proc is not None and running.proc.poll() is None:
        running.proc.kill()
        running.proc.wait()


def write_skill(project: Path, body: str) -> None:
    folder = project / "skills" / "vaults"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(SKILL.format(body=body))


def first_user_message(request: dict[str, Any]) -> str:
    return next(str(m["content"]) for m in request["messages"] if m["role"] == "user")


async def fire_and_read_skill(service: Running, model: FakeOpenAIServer) -> str:
    """Fire the watcher; the first user message the model gets for that callback."""
    seen = len(model.requests)
    status, _ = await asyncio.to_thread(service.call, "POST", "/hooks/ingest/vault", {"health": 1.05})
    assert 202 == status
    await wait_for(lambda: len(model.requests) > seen, timeout_s=20, what="the session's model request")
    return first_user_message(model.requests[seen])


async def sighup_and_wait(service: Running, line: str) -> None:
    assert service.proc is not None
    before = service.log.read_text().count(line)
    service.proc.send_signal(signal.SIGHUP)
    await wait_for(lambda: service.log.read_text().count(line) > before, timeout_s=20, what=line)


async def test_sighup_reloads_skill_text_for_new_sessions(
    tmp_path: Path, service: Running, model: FakeOpenAIServer
) -> None:
    """After SIGHUP a new session gets the edited SKILL.md; a malformed one keeps the last good text."""
    await asyncio.to_thread(service.start)
    assert "liquidation is near" in await fire_and_read_skill(service, model)

    write_skill(tmp_path, "Health below 1.2 means: page the vault team.")
    await sighup_and_wait(service, "reloaded:")
    after_reload = await fire_and_read_skill(service, model)
    assert "page the vault team" in after_reload
    assert "liquidation is near" not in after_reload

    (tmp_path / "skills" / "vaults" / "SKILL.md").write_text("no front matter here\n")
    await sighup_and_wait(service, "reload refused")
    assert "skills/vaults/SKILL.md:1" in service.log.read_text()
    assert "page the vault team" in await fire_and_read_skill(service, model)
