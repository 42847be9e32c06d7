"""misfire: skip | runOnce for a schedule missed while the service was down."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sentinel_hooks.clock import to_ms
from sentinel_hooks.store import open_store
from sentinel_hooks.store.shortcuts import get_watcher_state, put_watcher_state
from sentinel_hooks.watchers.state import WatcherState
from tests.service.conftest import Starter
from tests.support import Endpoint, wait_for


async def remember_missed_run(tmp_path: Path, watcher_id: str) -> None:
    """Leave a state whose planned run passed an hour ago (as after downtime)."""
    store = open_store("sqlite:///state.db", base_dir=tmp_path)
    await store.open()
    missed = datetime.now(UTC) - timedelta(hours=1)
    await put_watcher_state(store, watcher_id, {"nextCheckAtMs": to_ms(missed)})
    await store.close()


def yearly(watcher_id: str, url: str, misfire: str) -> str:
    return f"""\
id: {watcher_id}
strategy: http-poll
endpoint: "{url}"
schedule: "0 0 1 1 *"
misfire: {misfire}
deliveryTargets: [console]
"""


async def test_run_once_makes_up_a_missed_run_and_skip_does_not(
    start_service: Starter, endpoint: Endpoint, tmp_path: Path
) -> None:
    """After downtime, runOnce polls once at start; skip (the default) waits for the next scheduled run."""
    other = Endpoint()
    await other.start()
    try:
        await remember_missed_run(tmp_path, "yearly")
        await remember_missed_run(tmp_path, "skipper")
        watchers = {
            "y.yaml": yearly("yearly", endpoint.url(), "runOnce"),
            "s.yaml": yearly("skipper", other.url(), "skip"),
        }
        service = await start_service(watchers=watchers)
        await wait_for(lambda: endpoint.requests == 1, what="the made-up run")
        assert 0 == other.requests
        status = service.manager.status(service.manager.get("skipper"))
        assert "-01-01T00:00:00" in status["nextCheckAt"]
    finally:
        await other.stop()


async def test_the_run_planned_at_start_is_shown_and_stored_without_a_state_per_idle_watcher(
    start_service: Starter, endpoint: Endpoint, tmp_path: Path
) -> None:
    """A watcher that has not polled yet shares the initial state (issue 34.5: no copy of its
    own just to hold its next check), yet its status shows the run planned at start, and a stop
    stores it, so that ``runOnce`` after downtime knows which run was missed."""
    hourly = f"""\
id: hourly
strategy: http-poll
endpoint: "{endpoint.url()}"
intervalMs: 3600000
misfire: runOnce
deliveryTargets: [console]
"""
    service = await start_service(watchers={"h.yaml": hourly})
    runner = service.manager.get("hourly")
    assert runner._state is WatcherState.from_json(None)  # what an idle watcher holds
    planned = service.scheduler.get_job("hourly").next_run_time
    assert to_ms(planned) == to_ms(datetime.fromisoformat(service.manager.status(runner)["nextCheckAt"]))
    await service.stop()
    store = open_store("sqlite:///state.db", base_dir=tmp_path)
    await store.open()
    try:
        stored = await get_watcher_state(store, "hourly")
    finally:
        await store.close()
    assert stored is not None
    assert to_ms(planned) == stored["nextCheckAtMs"]
    assert 0 == endpoint.requests
