"""Probe observations through the firing pipeline: episodes, conditions, notifyResolved (SPEC.md §3, §4).

The outcomes are fed to a service's pipeline directly, ten seconds apart, as the `command`
strategy hands them over (its triggers written out here), so no probe process runs.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sentinel_hooks.config.watcher import AnyWatcher
from sentinel_hooks.service import Service
from sentinel_hooks.watchers.pipeline import FiringPipeline
from sentinel_hooks.watchers.state import WatcherState
from sentinel_hooks.watchers.strategies.probe_state import (
    ProbeFailure,
    ProbeOutcome,
    ProbeReport,
    ProbeTrigger,
)
from sentinel_hooks.watchers.strategy import Observed
from tests.service.conftest import Starter

T0 = datetime(2026, 1, 1, tzinfo=UTC)
FAIL = ProbeFailure("probe stdout is not JSON: 'oops'")


def stalled(digest: str = "d1", **value: Any) -> tuple[Any, ProbeOutcome]:
    return value, ProbeReport(None, digest)


def progressing() -> tuple[Any, ProbeOutcome]:
    return {"class": "progressing"}, ProbeReport("progressing", "moving")


def failed() -> tuple[Any, ProbeOutcome]:
    return {"probeError": FAIL.reason, "errors": 1}, FAIL


class Feed:
    """One watcher's pipeline fed probe outcomes; records the resolved lines it sends."""

    def __init__(self, service: Service, spec: AnyWatcher) -> None:
        self.resolved: list[str | None] = []  # None: notifyResolved off
        self.resolved_for: list[str | None] = []  # the callback each resolved line carries
        self.settles: list[bool] = []  # whether each may settle its fire resolved
        self.fired: list[str] = []  # the callback of each accepted fire
        self.spec = spec
        self.state = WatcherState()
        self.at = T0
        self.pipeline = FiringPipeline(
            store=service.store,
            clock=service.clock,
            service=service.config.service,
            intake=service.intake,
            base_dir=service.config.base_dir,
            redactor=service.redactor,
            on_resolved=self._record,
        )

    async def _record(
        self, watcher: AnyWatcher, text: str | None, callback_id: str | None = None, *, settle: bool = True
    ) -> None:
        self.settles.append(settle)
        self.resolved.append(text)
        self.resolved_for.append(callback_id)

    async def __call__(
        self, observation: tuple[Any, ProbeOutcome], trigger: ProbeTrigger | None = None
    ) -> Any:
        """Observe one probe outcome; the kind it fires (None: nothing fired)."""
        value, outcome = observation
        observed = Observed(value=value, at=self.at, trigger=trigger, probe=outcome)
        self.at += timedelta(seconds=10)
        result = await self.pipeline.observe(self.spec, observed, self.state)
        self.state = result.state
        if result.fired and result.contract is not None:
            self.fired.append(result.contract.callback_id)
            return result.contract.trigger.kind
        return None


async def feed_for(start_service: Starter, extra: str = "") -> Feed:
    """A Feed for a disabled `command` watcher ``job`` (the service never runs its probe)."""
    text = (
        "id: job\nstrategy: command\ncommand: [probe]\nintervalMs: 1000\nenabled: false\n"
        f"deliveryTargets: [console]\n{extra}"
    )
    service = await start_service(watchers={"w.yaml": text})
    return Feed(service, service.manager.get("job").spec)


async def test_a_stall_that_ends_sends_one_resolved_line(start_service: Starter) -> None:
    """notifyResolved: progress after a fired stall says how long it lasted, once."""
    feed = await feed_for(start_service, "fire: {eventName: job_stalled, notifyResolved: true}\n")
    kinds = [await feed(stalled(), "no_progress"), await feed(stalled(), "no_progress")]
    kinds += [await feed(stalled(), "no_progress"), await feed(progressing()), await feed(progressing())]
    assert ["no_progress", None, None, None, None] == kinds
    assert ["Sentinel: job_stalled on job resolved after 30s."] == feed.resolved


async def test_a_probe_that_succeeds_again_sends_one_resolved_line(start_service: Starter) -> None:
    """notifyResolved: the first good report after a fired probe error ends that episode."""
    feed = await feed_for(start_service, "fire: {eventName: job_stalled, notifyResolved: true}\n")
    kinds = [await feed(failed(), "terminal"), await feed(failed(), "terminal"), await feed(stalled())]
    assert ["terminal", None, None] == kinds
    assert ["Sentinel: job_stalled on job resolved after 20s."] == feed.resolved


async def test_no_resolved_line_without_notify_resolved(start_service: Starter) -> None:
    """An episode that ends sends nothing unless notifyResolved is set."""
    feed = await feed_for(start_service)
    await feed(stalled(), "no_progress")
    await feed(progressing())
    assert [] == feed.resolved


async def test_probe_episodes_fire_once_with_a_level_trigger(start_service: Starter) -> None:
    """fire.trigger: level is about conditions: a stall still fires once per episode."""
    feed = await feed_for(start_service, "fire: {trigger: level}\n")
    kinds = [await feed(stalled(), "no_progress") for _ in range(4)]
    assert ["no_progress", None, None, None] == kinds


async def test_a_condition_that_becomes_true_during_a_stall_fires_a_match(start_service: Starter) -> None:
    """With conditions given, a match fires while a stall episode lasts (the stall fired already)."""
    feed = await feed_for(start_service, "conditions: [{path: summary, op: contains, value: disk}]\n")
    first = await feed(stalled(summary="waiting"), "no_progress")
    second = await feed(stalled(summary="waiting"), "no_progress")
    third = await feed(stalled(summary="disk full"), "no_progress")
    fourth = await feed(stalled(summary="disk full"), "no_progress")
    assert ["no_progress", None, "match", None] == [first, second, third, fourth]


async def test_a_probe_trigger_and_a_match_on_one_observation_fire_once(start_service: Starter) -> None:
    """The probe trigger fires; the match's edge counts as fired, so it does not fire next time."""
    feed = await feed_for(start_service, "conditions: [{path: summary, op: contains, value: disk}]\n")
    kinds = [await feed(stalled(summary="disk full"), "no_progress")]
    kinds.append(await feed(stalled(summary="disk full"), "no_progress"))
    assert ["no_progress", None] == kinds


async def test_a_probe_error_neither_matches_nor_resolves_conditions(start_service: Starter) -> None:
    """A probe error says nothing about the job: a firing condition stays fired through it."""
    extra = "conditions: [{path: summary, op: contains, value: disk}]\nfire: {notifyResolved: true}\n"
    feed = await feed_for(start_service, extra)
    kinds = [await feed(stalled("d1", summary="disk full")), await feed(failed(), "terminal")]
    assert (["match", "terminal"], True, []) == (kinds, feed.state.firing.firing, feed.resolved)
    assert None is await feed(stalled("d2", summary="disk full"))


DISK = "conditions: [{path: summary, op: contains, value: disk}]\nfire: {notifyResolved: true}\n"


async def test_a_resolved_condition_names_the_fire_of_its_episode(start_service: Starter) -> None:
    """Each resolved line carries the callback of its episode's fire (so it joins that fire's thread)."""
    feed = await feed_for(start_service, DISK)
    for summary in ("disk full", "ok", "disk full again", "disk full again", "ok"):
        await feed(stalled(summary=summary))
    assert (2, feed.fired) == (len(feed.resolved), feed.resolved_for)


async def test_a_probe_episode_resolves_without_a_fire(start_service: Starter) -> None:
    """A probe episode keeps no callback: its resolved line carries none (it posts unthreaded)."""
    feed = await feed_for(start_service, "fire: {eventName: job_stalled, notifyResolved: true}\n")
    await feed(stalled(), "no_progress")
    await feed(progressing())
    assert ([None], 1) == (feed.resolved_for, len(feed.fired))


async def test_a_probe_fire_that_stands_for_a_match_is_the_episode_fire(start_service: Starter) -> None:
    """When the probe trigger wins over a match of the same observation, the condition's resolved
    line names that fire."""
    feed = await feed_for(start_service, DISK)
    await feed(stalled(summary="disk full"), "no_progress")
    await feed(progressing())
    assert (1, feed.fired) == (len(feed.resolved), feed.resolved_for)


async def test_a_condition_that_ends_names_its_fire_even_with_notify_resolved_off(
    start_service: Starter,
) -> None:
    """Without notifyResolved there is no line, but the hook still gets the fire whose condition
    ended, so a fire resolved before its page settles ``resolved`` (SPEC §6.4)."""
    feed = await feed_for(start_service, "conditions: [{path: summary, op: contains, value: disk}]\n")
    await feed(stalled(summary="disk full"))
    await feed(stalled(summary="fine"))
    assert ([None], feed.fired) == (feed.resolved, feed.resolved_for)


async def test_a_changed_condition_that_ends_does_not_resolve_its_fire(start_service: Starter) -> None:
    """A ``changed`` condition holds for the one observation that saw the change: its turning
    false the next time marks no end, so nothing settles the fire ``resolved`` before its page
    (with notifyResolved off the hook is not even asked)."""
    feed = await feed_for(start_service, "conditions: [{path: summary, op: changed}]\n")
    await feed(stalled(summary="disk full"))
    await feed(stalled(summary="disk fuller"))
    await feed(stalled(summary="disk fuller"))
    assert 1 <= len(feed.fired)
    assert ([], []) == (feed.resolved, feed.settles)


async def test_a_changed_condition_with_notify_resolved_sends_its_line_without_settling(
    start_service: Starter,
) -> None:
    feed = await feed_for(
        start_service, "conditions: [{path: summary, op: changed}]\nfire: {notifyResolved: true}\n"
    )
    await feed(stalled(summary="disk full"))
    await feed(stalled(summary="disk fuller"))
    await feed(stalled(summary="disk fuller"))
    assert feed.resolved
    assert all(text is not None for text in feed.resolved)
    assert [False] * len(feed.resolved) == feed.settles
