"""The firing pipeline through a running service: lifecycle, cooldown, fireOnce, templates, goal files."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sentinel_hooks.service import Service
from sentinel_hooks.store.shortcuts import get_envelope, get_watcher_state
from sentinel_hooks.watchers import writeback
from tests.service.conftest import Starter
from tests.support import wait_for


def webhook(watcher_id: str, extra: str = "", conditions: str = "[{path: v, op: gt, value: 10}]") -> str:
    return (
        f"id: {watcher_id}\nstrategy: webhook\nconditions: {conditions}\ndeliveryTargets: [console]\n{extra}"
    )


async def push(service: Service, watcher_id: str, *values: object) -> list[bool]:
    fired = []
    for value in values:
        outcome = await service.manager.ingest(watcher_id, value)
        fired.append(outcome.fired)
    return fired


async def test_events_are_level_triggered(start_service: Starter) -> None:
    """Webhook events fire on every match by default."""
    service = await start_service(watchers={"w.yaml": webhook("w")})
    assert [True, True, False, True] == await push(service, "w", {"v": 11}, {"v": 12}, {"v": 1}, {"v": 13})


async def test_pushes_wait_for_no_write_back_window(
    start_service: Starter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A push's writes go out at once: with the write-back's gathering window at 60 s, ten events
    pushed one after the other (each a fire: an observation and a state write) take seconds, not
    the twenty windows they used to sit out."""
    monkeypatch.setattr(writeback, "BUSY_WINDOW_S", 60.0)
    service = await start_service(watchers={"w.yaml": webhook("w")})
    async with asyncio.timeout(30):
        assert [True] * 10 == await push(service, "w", *({"v": 11 + i} for i in range(10)))
    assert 10 == len(await service.store.observations("w"))


async def test_edge_trigger_fires_on_becoming_true(start_service: Starter) -> None:
    """fire.trigger: edge fires when the condition becomes true, then re-arms when false."""
    service = await start_service(watchers={"w.yaml": webhook("w", "fire: {trigger: edge}\n")})
    assert [True, False, False, True] == await push(service, "w", {"v": 11}, {"v": 12}, {"v": 1}, {"v": 13})


async def test_cooldown_suppresses_fires(start_service: Starter) -> None:
    """cooldownMs: no second fire inside the cooldown."""
    service = await start_service(watchers={"w.yaml": webhook("w", "cooldownMs: 60000\n")})
    assert [True, False] == await push(service, "w", {"v": 11}, {"v": 12})


async def test_fire_once_disables_the_watcher(start_service: Starter) -> None:
    """fireOnce: the first fire disables the watcher durably."""
    service = await start_service(watchers={"w.yaml": webhook("w", "fireOnce: true\n")})
    assert [True] == await push(service, "w", {"v": 11})
    state = await get_watcher_state(service.store, "w")
    assert state is not None
    assert (False, "fireOnce") == (state["enabled"], state["disabledReason"])


async def test_template_error_at_fire_time_is_recorded_and_watcher_keeps_running(
    start_service: Starter,
) -> None:
    """A placeholder that does not resolve: lastError set, nothing sent, later events still fire."""
    extra = "fire: {payloadTemplate: {p: '${payload.price}'}}\n"
    service = await start_service(watchers={"w.yaml": webhook("w", extra, conditions="[]")})
    assert [False, True] == await push(service, "w", {"v": 1}, {"v": 2, "price": 5})
    runner = service.manager.get("w")
    assert 1 == runner.state.fires
    page = await service.store.list_contracts(watcher_id="w")
    assert 1 == len(page.items)


async def test_template_error_shows_in_status(start_service: Starter) -> None:
    """The template error is the watcher's lastError."""
    extra = "fire: {payloadTemplate: {p: '${payload.price}'}}\n"
    service = await start_service(watchers={"w.yaml": webhook("w", extra, conditions="[]")})
    await push(service, "w", {"v": 1})
    error = service.manager.status(service.manager.get("w"))["lastError"]
    assert "payload.price" in error


async def test_goal_file_is_read_at_every_fire(start_service: Starter, tmp_path: Path) -> None:
    """Changes to operatorGoalFile between two fires are seen by the second."""
    (tmp_path / "goal.md").write_text("first policy")
    extra = "fire: {operatorGoalFile: goal.md}\n"
    service = await start_service(watchers={"w.yaml": webhook("w", extra, conditions="[]")})
    await push(service, "w", {"n": 1})
    (tmp_path / "goal.md").write_text("second policy")
    await push(service, "w", {"n": 2})
    page = await service.store.list_contracts(watcher_id="w")
    contexts = []
    for contract in reversed(page.items):
        envelope = await get_envelope(service.store, contract.callback_id)
        assert envelope is not None
        contexts.append(envelope.operator_goal_runtime_context)
    assert ["first policy", "second policy"] == contexts


async def test_dedupe_window_refuses_the_same_event(start_service: Starter) -> None:
    """The same payload inside the dedupe window creates a deduped contract and no second fire."""
    service = await start_service(watchers={"w.yaml": webhook("w", conditions="[]")}, dedupe=60000)
    assert [True, False] == await push(service, "w", {"n": 1}, {"n": 1})
    newest, first = (await service.store.list_contracts(watcher_id="w")).items
    assert "deduped" == newest.state
    assert first.state in ("pending", "notifying", "fulfilled")  # the console session may be answering it


async def test_quiet_source_fires_no_progress_once(start_service: Starter) -> None:
    """expectEventWithinMs: a quiet source fires one no_progress trigger, re-armed by an event."""
    service = await start_service(watchers={"w.yaml": webhook("w", "expectEventWithinMs: 200\n")})

    async def kinds() -> list[str]:
        page = await service.store.list_contracts(watcher_id="w")
        return [c.trigger.kind for c in page.items]

    await wait_for(kinds, what="a no_progress fire")
    assert ["no_progress"] == await kinds()
    await push(service, "w", {"v": 1})
    await wait_for(lambda: _count(kinds, 2), what="a second quiet period")
    assert ["no_progress", "no_progress"] == await kinds()


async def _count(kinds: object, n: int) -> bool:
    return len(await kinds()) >= n  # type: ignore[operator]


def firing(service: Service, watcher_id: str) -> bool:
    """The watcher's status ``firing``, as the API shows it."""
    return bool(service.manager.status(service.manager.get(watcher_id))["firing"])


async def test_a_webhook_event_fires_once_and_leaves_nothing_firing(start_service: Starter) -> None:
    """A level-triggered webhook event fires, and the status is not ``firing`` afterwards."""
    service = await start_service(watchers={"w.yaml": webhook("w")})
    assert [True, True] == await push(service, "w", {"v": 11}, {"v": 12})
    assert not firing(service, "w")


async def test_an_edge_webhook_is_firing_until_its_condition_turns_false(start_service: Starter) -> None:
    """fire.trigger: edge on a webhook: ``firing`` from the fire until an event that does not match."""
    service = await start_service(watchers={"w.yaml": webhook("w", "fire: {trigger: edge}\n")})
    await push(service, "w", {"v": 11})
    assert firing(service, "w")
    await push(service, "w", {"v": 1})
    assert not firing(service, "w")


async def test_a_quiet_period_that_fired_is_firing_until_an_event(start_service: Starter) -> None:
    """expectEventWithinMs: the quiet period's no_progress fire shows ``firing`` until an event re-arms it."""
    service = await start_service(watchers={"w.yaml": webhook("w", "expectEventWithinMs: 300\n")})
    await wait_for(lambda: firing(service, "w"), what="the quiet period's fire")
    await push(service, "w", {"v": 1})
    assert not firing(service, "w")
