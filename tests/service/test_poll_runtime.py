"""How polls run at scale (SPEC §3/§4): phased first runs, skips, failures logged and written on
transitions only. A real Service on SQLite against a local endpoint."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp import web

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from sentinel_hooks.store.shortcuts import get_watcher_state
from sentinel_hooks.watchers.runner import STATE_FLUSH_S
from sentinel_hooks.watchers.schedule import phase
from tests.service.conftest import SERVICE_CONFIG, Starter
from tests.service.test_http_poll_service import poll_watcher
from tests.support import Endpoint, wait_for

RUNNER_LOG = "sentinel_hooks.watchers.runner"
NEVER = "[{path: status, op: eq, value: never}]"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


async def test_first_polls_are_at_each_watchers_phase_none_already_due(
    start_service: Starter, endpoint: Endpoint
) -> None:
    """60 watchers: each first run is at its id's phase of the interval, within one interval
    from the start (the first runs spread over it, instead of all falling due at once)."""
    watchers = {
        f"w{i}.yaml": poll_watcher(endpoint.url(), conditions=NEVER)
        .replace("id: probe", f"id: w{i}")
        .replace("intervalMs: 100", "intervalMs: 60000")
        for i in range(60)
    }
    before = datetime.now(UTC)
    service = await start_service(watchers=watchers)
    started = datetime.now(UTC)
    jobs = {job.id: job.next_run_time for job in service.scheduler.get_jobs()}
    interval = timedelta(seconds=60)
    assert {f"w{i}" for i in range(60)} == set(jobs)
    assert all(phase(wid, interval) == (at - EPOCH) % interval for wid, at in jobs.items())
    assert all(before <= at < started + interval for at in jobs.values())
    assert max(jobs.values()) - min(jobs.values()) > interval / 2


class CrawlingClock:
    """Wall-clock time that also moves ``step_s`` on every reading: a start that takes long."""

    def __init__(self, step_s: float) -> None:
        self._now = datetime.now(UTC)
        self._step = timedelta(seconds=step_s)

    def now(self) -> datetime:
        self._now += self._step
        return self._now

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def test_a_slow_start_schedules_every_first_run_on_its_phase_from_one_base(
    tmp_path: Path, endpoint: Endpoint
) -> None:
    """Starting many watchers takes time (here several intervals of a crawling clock); every first
    run is still taken from one base, on the watcher's phase, all within one interval of each
    other: no herd, and none pushed an interval later because the start was slow."""
    (tmp_path / "sentinel.yaml").write_text(
        SERVICE_CONFIG.format(
            extra="", allowed='["127.0.0.1"]', server="{host: 127.0.0.1, port: 0}", dedupe=0, limits=""
        )
    )
    (tmp_path / "watchers").mkdir()
    for i in range(40):
        text = poll_watcher(endpoint.url(), conditions=NEVER).replace("id: probe", f"id: w{i}")
        (tmp_path / "watchers" / f"w{i}.yaml").write_text(text.replace("intervalMs: 100", "intervalMs: 5000"))
    clock = CrawlingClock(step_s=0.5)  # 40 watchers: the start "takes" several intervals
    service = Service(load_config(tmp_path / "sentinel.yaml", environ={}), clock=clock)
    await service.start()
    try:
        jobs = {job.id: job.next_run_time for job in service.scheduler.get_jobs()}
        interval = timedelta(seconds=5)
        assert 40 == len(jobs)
        assert all(phase(wid, interval) == (at - EPOCH) % interval for wid, at in jobs.items())
        assert max(jobs.values()) - min(jobs.values()) < interval
        statuses = [service.manager.status(runner) for runner in service.manager.runners()]
        assert all(s["nextCheckAt"] is not None for s in statuses)
        assert 0 == endpoint.requests
    finally:
        await service.stop()


async def test_a_poll_due_while_the_previous_one_runs_is_skipped_and_counted(
    start_service: Starter, endpoint: Endpoint
) -> None:
    """intervalMs 100 against an endpoint that holds the request: polls never overlap; the runs
    that come due meanwhile are counted as skipped (reason busy), and polling goes on afterwards."""
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        await release.wait()
        return web.json_response({"status": "ok"})

    endpoint.handler = slow
    service = await start_service(
        watchers={"p.yaml": poll_watcher(endpoint.url(), conditions=NEVER).replace("300", "5000")}
    )
    skipped = service.metrics.polls_skipped.labels("busy")
    await wait_for(lambda: skipped._value.get() >= 3, what="three skipped runs")
    assert 1 == endpoint.requests
    release.set()
    runner = service.manager.get("probe")
    await wait_for(lambda: endpoint.requests >= 3 and runner.state.last_check_at, what="polls after the hold")
    assert 0 == runner.state.consecutive_failures


async def test_failures_warn_and_are_written_on_transitions_only(
    start_service: Starter, endpoint: Endpoint, caplog: pytest.LogCaptureFixture
) -> None:
    """A failing streak: one WARNING and one state write at ok → failing (the count is kept in
    memory and flushed later); the recovery is logged and written; a new streak warns again;
    stopping writes the latest count."""
    failing = True

    async def flaky(request: web.Request) -> web.Response:
        return web.json_response({"status": "x"}, status=500 if failing else 200)

    endpoint.handler = flaky
    caplog.set_level(logging.DEBUG, logger=RUNNER_LOG)
    # a loaded machine can hold the first answer past 0.3 s: that timeout would be the streak's warning
    watcher = poll_watcher(endpoint.url(), conditions=NEVER).replace("timeoutMs: 300", "timeoutMs: 5000")
    service = await start_service(watchers={"p.yaml": watcher})
    runner = service.manager.get("probe")

    def warnings() -> list[str]:
        return [
            r.getMessage() for r in caplog.records if r.name == RUNNER_LOG and r.levelno >= logging.WARNING
        ]

    await wait_for(lambda: runner.state.consecutive_failures >= 4, what="four failed polls")
    assert 1 == len(warnings())
    assert "HTTP 500" in warnings()[0]
    stored = await get_watcher_state(service.store, "probe")
    assert stored is not None
    assert 1 <= stored["consecutiveFailures"] < runner.state.consecutive_failures

    failing = False

    async def recovery_stored() -> object:
        stored = await get_watcher_state(service.store, "probe")
        # the stored form leaves out what is at its default (no failures, no error)
        return stored is not None and (0, None) == (
            stored.get("consecutiveFailures", 0),
            stored.get("lastError"),
        )

    # written at the transition, well before the periodic flush (STATE_FLUSH_S) would
    await wait_for(recovery_stored, timeout_s=STATE_FLUSH_S / 2, what="the recovery to be stored")
    # the runner logs the recovery a moment after storing it (one more await in between)
    await wait_for(
        lambda: any("recovered after" in r.getMessage() for r in caplog.records if r.levelno == logging.INFO),
        timeout_s=5,
        what="the recovery logged",
    )

    failing = True
    await wait_for(lambda: runner.state.consecutive_failures >= 2, what="a second streak")
    assert 2 == len(warnings())
    await runner.stop()
    stored = await get_watcher_state(service.store, "probe")
    assert stored is not None
    assert runner.state.consecutive_failures == stored["consecutiveFailures"]


@pytest.mark.slow
async def test_reload_parses_the_files_off_the_event_loop(start_service: Starter, endpoint: Endpoint) -> None:
    """SIGHUP with 150 unchanged watchers: other tasks keep running while the files are parsed."""
    watchers = {
        f"w{i}.yaml": poll_watcher(endpoint.url(), conditions=NEVER)
        .replace("id: probe", f"id: w{i}")
        .replace("intervalMs: 100", "intervalMs: 60000")
        for i in range(150)
    }
    service = await start_service(watchers=watchers)
    reload = asyncio.create_task(service.reload())
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while not reload.done():
            ticks += 1
            await asyncio.sleep(0.001)

    report, _ = await asyncio.gather(reload, ticker())
    assert report is not None
    assert ([], [], []) == (report.added, report.changed, report.removed)
    assert ticks >= 3
