"""WatcherManager in cluster mode: runners for all, started only while their lease is held."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import pytest

from sentinel_hooks.store.shortcuts import get_watcher_state, last_observation, put_watcher_state
from tests.cluster.conftest import ManagerHarness
from tests.support import wait_for

Harness = Callable[..., Awaitable[ManagerHarness]]


def running(h: ManagerHarness) -> set[str]:
    return {r.id for r in h.manager.runners() if r.running}


async def test_without_ownership_every_watcher_starts(harness: Harness) -> None:
    """Single-process mode (no ownership): every watcher runs, as before."""
    h = await harness(cluster=False)
    assert ({"poll-1", "poll-2", "hook"}, set()) == (running(h), h.ownership.tracked)


async def test_cluster_mode_runs_only_webhooks_until_a_lease_is_acquired(harness: Harness) -> None:
    """Every watcher gets a runner; polled ones are tracked, not started; webhooks run at once."""
    h = await harness()
    runners = {r.id for r in h.manager.runners()}
    assert ({"poll-1", "poll-2", "hook"}, {"hook"}) == (runners, running(h))
    assert {"poll-1", "poll-2"} == h.ownership.tracked


async def test_subscriptions_follow_the_same_ownership(harness: Harness) -> None:
    """A subscribed (sse) watcher is tracked and waits for its lease like a polled one."""
    h = await harness(sse=True)
    waiting = "stream" in h.ownership.tracked and "stream" not in running(h)
    h.ownership.held["stream"] = 1
    await h.manager.lease_acquired("stream", 1)
    assert (True, True) == (waiting, "stream" in running(h))


async def test_lease_held_at_start_starts_the_runner(harness: Harness) -> None:
    """A watcher whose lease is already held when it is added starts with it."""
    h = await harness(held={"poll-1": 3})
    assert {"poll-1", "hook"} == running(h)


async def test_lease_acquired_starts_the_runner(harness: Harness) -> None:
    """``lease_acquired`` starts that runner only."""
    h = await harness()
    h.ownership.held["poll-2"] = 1
    await h.manager.lease_acquired("poll-2", 1)
    assert {"poll-2", "hook"} == running(h)


async def test_lease_lost_stops_the_runner(harness: Harness) -> None:
    """``lease_lost`` stops the runner and removes its fence."""
    h = await harness(held={"poll-1": 1})
    await h.manager.lease_lost("poll-1")
    runner = h.manager.get("poll-1")
    assert (False, None) == (runner.running, runner.fence)


async def test_lease_acquired_loads_the_state_the_previous_owner_stored(harness: Harness) -> None:
    """The new owner starts from the stored state (fires, firing), not from its stale copy."""
    h = await harness()
    await put_watcher_state(h.store, "poll-1", {"fires": 7, "firing": {"firing": True}})
    h.ownership.held["poll-1"] = 1
    await h.manager.lease_acquired("poll-1", 1)
    state = h.manager.get("poll-1").state
    assert (7, True) == (state.fires, state.firing.firing)


async def test_start_reads_the_stored_states_of_the_runners_it_starts(harness: Harness) -> None:
    """A runner that starts with the manager (a held lease, a webhook) has its stored state."""
    stored = {"poll-1": {"fires": 4}, "hook": {"fires": 5}, "poll-2": {"fires": 6}}
    h = await harness(held={"poll-1": 1}, stored=stored)
    fires = {r.id: r.state.fires for r in h.manager.runners()}
    assert {"poll-1": 4, "hook": 5, "poll-2": 0} == fires  # poll-2 runs elsewhere: read later


async def test_idle_runners_take_their_stored_states_and_leased_ones_keep_their_own(harness: Harness) -> None:
    """``restore_idle_states`` gives a runner another replica runs its stored state (its status
    here); one whose lease was taken meanwhile keeps the state it read when it started."""
    h = await harness(stored={"poll-1": {"fires": 3}, "poll-2": {"fires": 9, "enabled": False}})
    h.ownership.held["poll-1"] = 1
    await h.manager.lease_acquired("poll-1", 1)
    await put_watcher_state(h.store, "poll-1", {"fires": 100})  # what this replica does not read again
    await h.manager.restore_idle_states()
    one, two = h.manager.get("poll-1"), h.manager.get("poll-2")
    assert (3, 9, "disabled") == (one.state.fires, two.state.fires, h.manager.status(two)["state"])


async def test_idle_states_that_cannot_be_read_are_skipped_not_fatal(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """A store that cannot answer (here: closed) leaves the idle runners' statuses as they were and
    says so in one warning; the start it is part of goes on."""
    h = await harness(stored={"poll-2": {"fires": 9}})
    await h.store.close()
    with caplog.at_level(logging.WARNING, logger="sentinel_hooks.watchers.manager"):
        await h.manager.restore_idle_states()
    assert 0 == h.manager.get("poll-2").state.fires
    assert ["could not read the stored states of 2 watcher(s) other replicas run (poll-1, poll-2)"] == [
        r.getMessage().split(";")[0] for r in caplog.records
    ]


async def test_enabling_a_watcher_without_its_lease_does_not_start_it(harness: Harness) -> None:
    """Enabling through the API on a replica that does not hold the lease starts nothing here."""
    h = await harness()
    await h.manager.set_enabled("poll-1", True)
    assert {"hook"} == running(h)


async def test_lease_events_for_webhooks_are_ignored(harness: Harness) -> None:
    """Webhook watchers need no lease: a stray lease_lost leaves them running."""
    h = await harness()
    await h.manager.lease_lost("hook")
    assert {"hook"} == running(h)


async def test_removed_watchers_are_untracked(harness: Harness) -> None:
    """A watcher removed by a reload is untracked (its lease released); webhooks never were tracked."""
    h = await harness()
    report = await h.manager.apply([w for w in h.config.watchers if w.spec.id == "poll-2"])
    assert (["hook", "poll-1"], ["poll-1"]) == (sorted(report.removed), h.ownership.untracked)


async def test_observation_is_acted_on_while_the_lease_is_held(harness: Harness) -> None:
    """With the fence passing, polls are observed and stored."""
    h = await harness(held={"poll-1": 1})
    await wait_for(lambda: last_observation(h.store, "poll-1"), what="an observation")


def dropped(h: ManagerHarness, reason: str) -> float:
    """``sentinel_observations_dropped_total{reason}`` as /metrics would show it."""
    value = h.metrics.registry.get_sample_value("sentinel_observations_dropped_total", {"reason": reason})
    return -1.0 if value is None else value


async def test_observation_is_dropped_and_runner_stops_when_the_lease_is_gone(harness: Harness) -> None:
    """A poll whose fence fails (lease taken) is not made, counted as dropped, and the runner stops
    itself: a replica that lost its lease never polls in the new holder's interval."""
    h = await harness()
    await h.manager.lease_acquired("poll-1", 1)  # the fake does not hold it: holds() is False
    runner = h.manager.get("poll-1")
    await wait_for(lambda: not runner.running, what="the runner to stop itself")
    assert (None, None) == (await last_observation(h.store, "poll-1"), runner.fence)
    assert 0 == h.endpoint.requests
    assert (True, 0.0) == (dropped(h, "lease_lost") >= 1, dropped(h, "lease_unknown"))


async def test_observation_is_dropped_but_runner_keeps_going_when_the_fence_cannot_tell(
    harness: Harness,
) -> None:
    """When the lease check fails (Redis unreachable), polls are not made; the keeper decides the rest."""
    h = await harness(held={"poll-1": 1})
    h.ownership.unsure = True
    await wait_for(lambda: dropped(h, "lease_unknown") >= 3, what="three polls not made")
    assert (None, True) == (await last_observation(h.store, "poll-1"), h.manager.get("poll-1").running)
    h.ownership.unsure = False
    await wait_for(lambda: h.endpoint.requests >= 1, what="a poll once the lease is vouched for again")


async def test_observation_dropped_for_want_of_a_lease_check_is_counted_and_shown(harness: Harness) -> None:
    """A drop the replica could not rule on is a metric and a failed check in the watcher's status,
    stored; the next observation acted on clears it."""
    h = await harness(held={"poll-1": 1})
    h.ownership.unsure = True
    runner = h.manager.get("poll-1")
    await wait_for(lambda: dropped(h, "lease_unknown") >= 2, what="two dropped observations")
    status = h.manager.status(runner)
    stored = await get_watcher_state(h.store, "poll-1")
    assert stored is not None
    assert ("failing", True) == (status["state"], status["consecutiveFailures"] >= 2)
    assert status["lastError"].startswith("observation dropped: cluster redis: check a lease")
    assert "observation dropped" in stored["lastError"]
    h.ownership.unsure = False
    await wait_for(lambda: h.manager.status(runner)["state"] == "ok", what="the next observation")
    assert (None, 0.0) == (h.manager.status(runner)["lastError"], dropped(h, "lease_lost"))
