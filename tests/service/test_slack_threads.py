"""One Slack thread per fire through a running service (SPEC.md §16), against a Slack Web API stand-in.

A fire's fan-out line, the agent's notify or the fallback, and the resolved line land in one
thread whose root shows the outcome; the thread and the fire it belongs to outlive a restart.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from sentinel_hooks.callbacks.intake.intake import LoggingSink
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from tests.delivery.slack_api import DISK_WATCHER, Posted, SlackApi, slack_api
from tests.support import wait_for

__all__ = ["slack_api"]

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: {timeout}
hookResponseDedupeWindowMs: 0
delivery: {{maxAttempts: 3, baseMs: 50, maxMs: 200, maxElapsedMs: 60000}}
targets:
  ops: {{type: slack, token: xoxb-test-token, channel: "#ops", apiBase: "{api}"}}
"""

WATCHER = DISK_WATCHER.replace("high}", "high, notifyResolved: true}")

Make = Callable[..., Awaitable[Service]]


@pytest.fixture
async def make_service(tmp_path: Path, slack_api: SlackApi) -> AsyncIterator[Make]:
    """``await make_service(agent=False, timeout_ms=…)`` → a started Service on ``tmp_path`` (the
    same store each time, so a second one is the first restarted)."""
    services: list[Service] = []

    async def make(*, agent: bool = True, timeout_ms: int = 20_000) -> Service:
        (tmp_path / "sentinel.yaml").write_text(CONFIG.format(timeout=timeout_ms, api=slack_api.base()))
        (tmp_path / "watchers").mkdir(exist_ok=True)
        (tmp_path / "watchers" / "disk.yaml").write_text(WATCHER)
        # agent=False: no session answers, so the contract waits for its deadline (the fallback)
        config = load_config(tmp_path / "sentinel.yaml", environ={})
        service = Service(config) if agent else Service(config, sink=LoggingSink())
        await service.start()
        services.append(service)
        return service

    yield make
    for service in services:
        await service.stop()


async def fire(service: Service, used: int) -> str | None:
    outcome = await service.manager.ingest("disk", {"used": used})
    return outcome.contract.callback_id if outcome.fired and outcome.contract is not None else None


def thread(api: SlackApi, callback_id: str) -> tuple[Posted, list[str]]:
    """The one root of ``callback_id`` and the kinds of its replies (fails on a second root)."""
    [root] = [m for m in api.roots() if m.callback_id == callback_id]
    return root, [m.kind for m in api.replies(root)]


async def test_fanout_notify_and_resolved_make_one_thread(make_service: Make, slack_api: SlackApi) -> None:
    """The agent answers: fan-out and notify share one thread whose root says ✅; the resolved line
    replies in it and the root then says ✅ · ✔."""
    service = await make_service()
    callback_id = await fire(service, 97)
    assert callback_id is not None
    await wait_for(lambda: len(slack_api.messages) == 2, what="the fan-out and the notify")
    await wait_for(lambda: thread(slack_api, callback_id)[0].text.startswith("✅"), what="the ✅ on the root")
    root, kinds = thread(slack_api, callback_id)
    assert ["fanout", "notify"] == sorted([root.kind, *kinds])
    await fire(service, 10)
    await wait_for(lambda: "resolved" in thread(slack_api, callback_id)[1], what="the resolved reply")
    await wait_for(lambda: "✔ resolved" in thread(slack_api, callback_id)[0].text, what="the ✔ on the root")
    root, _ = thread(slack_api, callback_id)
    assert ("✅ handled by the agent · ✔ resolved", 3) == (root.text.split(" — ")[0], len(slack_api.messages))


async def test_fallback_replies_in_the_fire_thread(make_service: Make, slack_api: SlackApi) -> None:
    """No agent answer: the fallback replies under the fan-out line, and the root says ⚠️ fallback."""
    service = await make_service(agent=False, timeout_ms=300)
    callback_id = await fire(service, 97)
    assert callback_id is not None
    # a push is answered as soon as its fire is stored, before the fan-out line is posted
    await wait_for(lambda: any(m.callback_id == callback_id for m in slack_api.roots()), what="the root")
    await wait_for(lambda: "⚠️" in thread(slack_api, callback_id)[0].text, what="the ⚠️ on the root")
    root, kinds = thread(slack_api, callback_id)
    assert ("fanout", ["fallback"], "⚠️ fallback — disk_full fired on disk") == (root.kind, kinds, root.text)


async def test_a_restart_between_fire_and_resolved_keeps_the_thread(
    make_service: Make, slack_api: SlackApi
) -> None:
    """The fire's callback (watcher state) and its thread's root (checkpoint) come from the store:
    after a restart the resolved line still replies under the fan-out line. (The restarted
    service also resumes the pending callback's session, whose notify joins the thread too.)"""
    first = await make_service(agent=False)
    callback_id = await fire(first, 97)
    assert callback_id is not None
    await wait_for(lambda: slack_api.roots(), what="the fan-out root")
    await first.stop()
    second = await make_service(agent=False)
    assert None is await fire(second, 10)
    await wait_for(lambda: "resolved" in thread(slack_api, callback_id)[1], what="the resolved reply")
    await wait_for(lambda: "✔ resolved" in thread(slack_api, callback_id)[0].text, what="the ✔ on the root")
    root, _ = thread(slack_api, callback_id)
    assert ("fanout", [root]) == (root.kind, slack_api.roots())


async def test_a_resolved_line_keys_on_the_fire(make_service: Make, slack_api: SlackApi) -> None:
    """The resolved delivery is keyed ``{callbackId}:{target}:resolved`` with the fire's callback."""
    service = await make_service(agent=False)
    callback_id = await fire(service, 97)
    await fire(service, 10)
    deliveries = await wait_for(lambda: _kinds(service, str(callback_id)), what="the resolved delivery")
    assert f"{callback_id}:ops:resolved" in deliveries


async def _kinds(service: Service, callback_id: str) -> list[str]:
    """Delivery keys of ``callback_id`` once its resolved one exists."""
    keys = [d.key for d in await service.store.list_deliveries(callback_id)]
    return keys if any(k.endswith(":resolved") for k in keys) else []
