"""One benchmark run per N: the Sentinel process, then the bare loop, against one endpoint.

Timeline for each N (every step bounded by a timeout or a fixed sleep):
start the service process with N watchers → wait ``settle_s`` → scrape /metrics, read CPU,
sleep ``window_s`` (scraping /metrics every ``scrape_every_s`` meanwhile, as Prometheus would,
when set), read CPU and RSS, scrape again → fetch the window's arrivals from the endpoint →
stop the service and count the WARNING and ERROR lines of its log; then the same window for the
bare loop on the same schedule phases. The endpoint runs on one core, the measured process on
the other.

With ``together`` (``--together``) the bare loop starts beside the ready service, on the same
core, requesting ``/b/<i>``; both are measured over the same ``rounds`` windows, so a slower
minute of the shared machine slows both sides of a ratio alike.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp

from watchbench.million import FromLaunch, from_launch, time_validate
from watchbench.procfs import cpu_plan, cpu_seconds, machine_busy_seconds
from watchbench.project import Project, write_project
from watchbench.results import OTHER_LOAD_WARNING, RunResult, median_round
from watchbench.spawn import Child
from watchbench.stats import (
    Scrape,
    histogram_quantile,
    log_problems,
    parse_metrics,
    percentile,
    share_at_most,
    wire_lags,
)

HTTP_TIMEOUT = aiohttp.ClientTimeout(total=60)


@dataclass(frozen=True)
class Plan:
    """How long each phase lasts."""

    window_s: float
    settle_s: float
    interval_ms: int = 10_000
    store: str = "sqlite:///state.db"
    ready_timeout_s: float = 300.0
    noisy_retries: int = 0  # measure an N again when other processes loaded the machine
    scrape_every_s: float | None = None  # scrape the service's /metrics this often in the window
    rounds: int = 1  # window pairs per N; the row is the pair with the median CPU ratio
    together: bool = False  # both sides at once on one core, ``rounds`` windows of one launch
    from_launch: bool = False  # the million mode: first poll and due polls from launch, validate


@dataclass(frozen=True)
class Window:
    """What one measurement window saw."""

    cpu_s: float
    seconds: float
    endpoint_cores: float  # what the endpoint process kept busy (it must keep up too)
    other_cores: float  # what processes outside this benchmark kept busy, on average
    rss_end_kib: int
    lags: list[float]
    scrape: Scrape | None
    scrapes: int = 0  # scrapes made during the window
    scrape_s: float = math.nan  # wall time of the scrape at the window's end
    ended_at: float = math.nan  # time.time() at the window's end


class Bench:
    """The endpoint process and the HTTP session the orchestrator reads it with."""

    def __init__(self, workdir: Path, endpoint: Child, port: int, http: aiohttp.ClientSession) -> None:
        self.workdir = workdir
        self.endpoint = endpoint
        self.endpoint_url = f"http://127.0.0.1:{port}"
        self.port = port
        self.http = http
        self._runs = 0
        self.endpoint_cpu, self.measured_cpu = cpu_plan()

    def _cpu_args(self) -> list[str]:
        return [] if self.measured_cpu is None else ["--cpu", str(self.measured_cpu)]

    async def _get_text(self, url: str) -> str:
        async with self.http.get(url) as response:
            response.raise_for_status()
            return await response.text()

    async def _measure(
        self,
        child: Child,
        plan: Plan,
        starts: dict[int, float],
        metrics_url: str | None,
        *,
        settle_s: float,
        side: str = "w",
        beside: Child | None = None,
    ) -> Window:
        """One window of ``child``; ``beside``, running at the same time, is not "other load"."""
        await asyncio.sleep(settle_s)
        before = parse_metrics(await self._get_text(metrics_url)) if metrics_url else None
        cpu0, t0, endpoint0 = child.cpu_seconds(), time.time(), self.endpoint.cpu_seconds()
        ours0 = cpu0 + endpoint0 + cpu_seconds(os.getpid()) + (beside.cpu_seconds() if beside else 0.0)
        busy0 = machine_busy_seconds()
        scrapes = await self._wait_window(plan, metrics_url, t0)
        cpu1, t1, endpoint1 = child.cpu_seconds(), time.time(), self.endpoint.cpu_seconds()
        ours1 = cpu1 + endpoint1 + cpu_seconds(os.getpid()) + (beside.cpu_seconds() if beside else 0.0)
        other_cores = max(0.0, machine_busy_seconds() - busy0 - (ours1 - ours0)) / (t1 - t0)
        if other_cores > OTHER_LOAD_WARNING:
            sys.stderr.write(
                f"bench: warning: other processes kept {other_cores:.2f} cores busy during the "
                f"{child.role} window; its numbers are not clean\n"
            )
        rss_end = child.rss_kib()
        scrape_began = time.monotonic()
        after_text = await self._get_text(metrics_url) if metrics_url else None
        scrape_s = time.monotonic() - scrape_began if metrics_url else math.nan
        after = parse_metrics(after_text) if after_text is not None else None
        arrivals = json.loads(
            await self._get_text(f"{self.endpoint_url}/_bench/arrivals?since={t0}&until={t1}&side={side}")
        )
        lags = wire_lags(arrivals["ids"], arrivals["at"], starts, plan.interval_ms / 1000)
        scrape = after.since(before) if after is not None and before is not None else None
        endpoint_cores = (endpoint1 - endpoint0) / (t1 - t0)
        return Window(
            cpu1 - cpu0, t1 - t0, endpoint_cores, other_cores, rss_end, lags, scrape, scrapes, scrape_s, t1
        )

    async def _wait_window(self, plan: Plan, metrics_url: str | None, t0: float) -> int:
        """Sleep through the window, scraping ``metrics_url`` every ``plan.scrape_every_s``; how
        many scrapes were made (each must answer 200)."""
        every = plan.scrape_every_s
        if metrics_url is None or not every:
            await asyncio.sleep(plan.window_s)
            return 0
        scrapes = 0
        while (due := t0 + (scrapes + 1) * every) < t0 + plan.window_s - every / 2:
            await asyncio.sleep(max(0.0, due - time.time()))  # a fixed cadence, however long scrapes take
            await self._get_text(metrics_url)
            scrapes += 1
        await asyncio.sleep(max(0.0, t0 + plan.window_s - time.time()))
        return scrapes

    async def _clear(self) -> None:
        async with self.http.post(f"{self.endpoint_url}/_bench/clear") as response:
            response.raise_for_status()

    async def _start_service(self, n: int, plan: Plan) -> tuple[Child, Project, dict[str, Any]]:
        """A service process with ``n`` watchers, ready (its schedule file written); the READY
        details get ``launched_at`` (time.time() just before the launch) and, in the million
        mode, ``validate_s`` / ``validate_cpu_s`` of the project, timed before the launch."""
        self._runs += 1
        project = write_project(
            self.workdir / f"n{n}-{self._runs}",
            n=n,
            port=self.port,
            interval_ms=plan.interval_ms,
            store=plan.store,
        )
        timed = await time_validate(project.config_file) if plan.from_launch else (math.nan, math.nan)
        await self._clear()
        launched_at = time.time()
        service = await Child.start(
            "service",
            [
                *("--project", str(project.root), "--n", str(n), "--max-s", self._max_s(plan)),
                *self._cpu_args(),
                *(["--no-warm-up"] if plan.from_launch else []),
            ],
            self.workdir,
        )
        try:
            ready = await service.ready(plan.ready_timeout_s)
        except BaseException:
            await service.stop()
            raise
        ready.update(launched_at=launched_at, validate_s=timed[0], validate_cpu_s=timed[1])
        return service, project, ready

    async def _start_bare(
        self, project: Project, starts: dict[int, float], plan: Plan, side: str
    ) -> tuple[Child, dict[str, Any], dict[int, float]]:
        """A bare loop on the service's schedule phases, ready; its own scheduled starts."""
        first = min(starts.values())
        offsets = {i: at - first for i, at in starts.items()}
        schedule_file = project.root / "bare-schedule.json"
        schedule_file.write_text(json.dumps({"interval_s": plan.interval_ms / 1000, "offsets": offsets}))
        bare = await Child.start(
            "bare",
            [
                *("--port", str(self.port), "--schedule", str(schedule_file), "--side", side),
                *("--max-s", self._max_s(plan), *self._cpu_args()),
            ],
            self.workdir,
        )
        try:
            bare_ready = await bare.ready(plan.ready_timeout_s)
        except BaseException:
            await bare.stop()
            raise
        return bare, bare_ready, {i: bare_ready["t0"] + offset for i, offset in offsets.items()}

    def _max_s(self, plan: Plan) -> str:
        windows = plan.window_s * (plan.rounds if plan.together else 1)
        return str(plan.ready_timeout_s + plan.settle_s + windows + 120)

    async def _stop_service(self, service: Child) -> int:
        """Stop it; how many WARNING and ERROR lines its log has (the first five are shown)."""
        await service.stop()
        problems = log_problems(service.log_path.read_text(errors="replace"))
        for line in problems[:5]:
            sys.stderr.write(f"bench: service log: {line}\n")
        return len(problems)

    async def run(self, n: int, plan: Plan) -> RunResult:
        """Measure Sentinel with ``n`` watchers, then the bare loop on the same schedule."""
        service, project, ready = await self._start_service(n, plan)
        try:
            starts = _starts(project)
            svc = await self._measure(
                service, plan, starts, f"{ready['url']}/metrics", settle_s=plan.settle_s
            )
            launch = await self._from_launch(ready, starts, svc.ended_at) if plan.from_launch else None
        finally:
            problems = await self._stop_service(service)
        await self._clear()
        bare, bare_ready, bare_starts = await self._start_bare(project, starts, plan, "w")
        try:
            base = await self._measure(bare, plan, bare_starts, None, settle_s=plan.settle_s)
        finally:
            await bare.stop()
        result = _result(n, plan, ready, svc, bare_ready, base, problems)
        if launch is None:
            return result
        return replace(
            result,
            first_poll_s=launch.first_poll_s,
            due_polled=launch.due_polled,
            due_total=launch.due_total,
            validate_s=float(ready["validate_s"]),
            validate_cpu_s=float(ready["validate_cpu_s"]),
        )

    async def _from_launch(self, ready: dict[str, Any], starts: dict[int, float], until: float) -> FromLaunch:
        """The service's first poll and due polls from its launch to ``until`` (``million``)."""
        launched = float(ready["launched_at"])
        arrivals = json.loads(
            await self._get_text(f"{self.endpoint_url}/_bench/arrivals?since={launched}&until={until}&side=w")
        )
        return from_launch(launched, until, arrivals["ids"], arrivals["at"], starts)

    async def run_together(self, n: int, plan: Plan) -> list[RunResult]:
        """Sentinel and the bare loop running at once, pinned to the same core, measured over the
        same ``plan.rounds`` windows: whatever slows the machine down meanwhile slows both."""
        service, project, ready = await self._start_service(n, plan)
        try:
            starts = _starts(project)
            bare, bare_ready, bare_starts = await self._start_bare(project, starts, plan, "b")
            try:
                results = []
                for window in range(plan.rounds):
                    settle_s = plan.settle_s if window == 0 else 0.0
                    svc, base = await asyncio.gather(
                        self._measure(
                            service, plan, starts, f"{ready['url']}/metrics", settle_s=settle_s, beside=bare
                        ),
                        self._measure(
                            bare, plan, bare_starts, None, settle_s=settle_s, side="b", beside=service
                        ),
                    )
                    results.append(_result(n, plan, ready, svc, bare_ready, base, 0))
            finally:
                await bare.stop()
        finally:
            problems = await self._stop_service(service)
        return [replace(result, log_problems=problems) for result in results]


def _starts(project: Project) -> dict[int, float]:
    """Each watcher's first scheduled poll, as the service wrote it once ready."""
    schedule = json.loads(project.schedule_file.read_text())
    return {int(i): float(at) for i, at in schedule["starts"].items()}


def _result(
    n: int,
    plan: Plan,
    ready: dict[str, Any],
    svc: Window,
    bare_ready: dict[str, Any],
    base: Window,
    log_problems: int,
) -> RunResult:
    scrape = svc.scrape or Scrape()
    polls, bare_polls = len(svc.lags), len(base.lags)
    return RunResult(
        n=n,
        window_s=svc.seconds,
        interval_s=plan.interval_ms / 1000,
        config_s=float(ready["config_s"]),
        load_s=float(ready["load_s"]),
        other_cores=max(svc.other_cores, base.other_cores),
        polls=polls,
        polls_per_s=polls / svc.seconds,
        sentinel_polls=scrape.polls,
        poll_errors=scrape.errors,
        fires=scrape.fires,
        dropped=scrape.dropped,
        scrapes=svc.scrapes,
        log_problems=log_problems,
        cpu_s=svc.cpu_s,
        cpu_per_1k_polls_s=_per_1k(svc.cpu_s, polls),
        lag_p50_ms=1000 * percentile(svc.lags, 0.50),
        lag_p99_ms=1000 * percentile(svc.lags, 0.99),
        lag_max_ms=1000 * max(svc.lags, default=math.nan),
        svc_lag_p50_ms=1000 * histogram_quantile(scrape.lag_buckets, 0.50),
        svc_lag_p99_ms=1000 * histogram_quantile(scrape.lag_buckets, 0.99),
        svc_lag_share_le_250ms=share_at_most(scrape.lag_buckets, 0.25),
        scrape_s=svc.scrape_s,
        rss_before_kib=int(ready["rss_before_kib"]),
        rss_end_kib=svc.rss_end_kib,
        rss_per_watcher_kib=(svc.rss_end_kib - int(ready["rss_before_kib"])) / n,
        bare_polls=bare_polls,
        bare_polls_per_s=bare_polls / base.seconds,
        bare_cpu_s=base.cpu_s,
        bare_cpu_per_1k_polls_s=_per_1k(base.cpu_s, bare_polls),
        bare_lag_p50_ms=1000 * percentile(base.lags, 0.50),
        bare_lag_p99_ms=1000 * percentile(base.lags, 0.99),
        bare_rss_per_watcher_kib=(base.rss_end_kib - int(bare_ready["rss_before_kib"])) / n,
        endpoint_cores=svc.endpoint_cores,
        bare_endpoint_cores=base.endpoint_cores,
    )


def _per_1k(cpu_s: float, polls: int) -> float:
    return 1000 * cpu_s / polls if polls else math.nan


async def _measure_round(bench: Bench, n: int, plan: Plan) -> RunResult:
    """One service window and one bare window; again (up to ``plan.noisy_retries`` times) while
    other processes loaded the machine, keeping the quietest."""
    result = await bench.run(n, plan)
    for _ in range(plan.noisy_retries):
        if result.other_cores <= OTHER_LOAD_WARNING:
            break
        sys.stderr.write(f"bench: measuring N = {n} again (the machine was shared)\n")
        again = await bench.run(n, plan)
        result = min(result, again, key=lambda r: r.other_cores)
    if plan.rounds > 1:
        _say_round(result)
    return result


def _say_round(result: RunResult) -> None:
    sys.stderr.write(
        f"bench: N = {result.n} round: CPU per 1k polls {result.cpu_per_1k_polls_s:.3f} s, "
        f"bare {result.bare_cpu_per_1k_polls_s:.3f} s, ratio {result.cpu_ratio_vs_bare:.2f}\n"
    )


async def run_all(
    sizes: list[int], plan: Plan, workdir: Path, on_result: Callable[[RunResult], None]
) -> list[RunResult]:
    """Start the endpoint, run every size (``on_result`` sees each as it ends), stop the endpoint
    (also on errors and Ctrl-C)."""
    endpoint_cpu, _ = cpu_plan()
    cpu_args = [] if endpoint_cpu is None else ["--cpu", str(endpoint_cpu)]
    runs = len(sizes) * plan.rounds * (1 + plan.noisy_retries)
    total_s = runs * 2 * (plan.ready_timeout_s + plan.settle_s + plan.window_s + 60)
    endpoint = await Child.start("endpoint", ["--max-s", str(total_s), *cpu_args], workdir)
    try:
        port = int((await endpoint.ready(30))["port"])
        async with aiohttp.ClientSession(timeout=HTTP_TIMEOUT) as http:
            bench = Bench(workdir, endpoint, port, http)
            results: list[RunResult] = []
            for n in sizes:
                if plan.together:
                    rounds = await bench.run_together(n, plan)
                    for each in rounds:
                        _say_round(each)
                else:
                    rounds = [await _measure_round(bench, n, plan) for _ in range(plan.rounds)]
                result = rounds[0] if plan.rounds == 1 else median_round(rounds)
                results.append(result)
                on_result(result)
            return results
    finally:
        await endpoint.stop()
