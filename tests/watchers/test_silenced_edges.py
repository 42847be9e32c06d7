"""Silences and the firing lifecycle (SPEC.md §14): a muted fire does not consume the edge.

The firing pipeline runs on a real in-memory store with a fake clock; silences are made and
expired through ``Silences`` as the API does. A model of the edge says what each observation
must do, and hypothesis tries sequences of observations, silences and time to break it.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sentinel_hooks.callbacks.intake.intake import CallbackIntake
from sentinel_hooks.callbacks.intake.silences import Silences
from sentinel_hooks.clock import FakeClock
from sentinel_hooks.config.loader import LoadedConfig, load_config
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.core.silences import Matcher
from sentinel_hooks.store.records import Contract
from sentinel_hooks.store.sqlite import SqliteStore
from sentinel_hooks.watchers.pipeline import FiringPipeline, Outcome
from sentinel_hooks.watchers.state import WatcherState
from sentinel_hooks.watchers.strategy import Observed

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WATCHERS = {
    "edge": "id: edge\nstrategy: http-poll\nendpoint: http://127.0.0.1:9/x\nintervalMs: 1000\n"
    "conditions: [{path: v, op: gt, value: 10}]\nfire: {eventName: high}\ndeliveryTargets: [console]\n",
    "level": "id: level\nstrategy: http-poll\nendpoint: http://127.0.0.1:9/x\nintervalMs: 1000\n"
    "conditions: [{path: v, op: gt, value: 10}]\nfire: {eventName: high, trigger: level}\n"
    "deliveryTargets: [console]\n",
}
_PROJECT: list[LoadedConfig] = []


def project() -> LoadedConfig:
    """One loaded project for every example (dedupe window 0: repeats are not deduped)."""
    if not _PROJECT:
        root = Path(tempfile.mkdtemp(prefix="silenced-edges-"))
        (root / "sentinel.yaml").write_text(
            "store: memory://\nhookResponseDedupeWindowMs: 0\nallowedHosts: ['127.0.0.1']\n"
            "allowPrivateNetworks: true\ntargets: {console: {type: console}}\n"
        )
        (root / "watchers").mkdir()
        for name, text in WATCHERS.items():
            (root / "watchers" / f"{name}.yaml").write_text(text)
        _PROJECT.append(load_config(root / "sentinel.yaml", environ={}))
    return _PROJECT[0]


class Sink:
    """Records the callbacks handed on to sessions."""

    def __init__(self) -> None:
        self.submitted: list[str] = []

    async def submit(self, envelope: Envelope, contract: Contract) -> None:
        self.submitted.append(contract.callback_id)

    async def requeue(self, contract: Contract) -> None:
        pass


@dataclass
class Rig:
    """A pipeline, its silences and a watcher's state, observation after observation."""

    store: SqliteStore
    watcher_id: str = "edge"
    clock: FakeClock = field(default_factory=lambda: FakeClock(T0))
    sink: Sink = field(default_factory=Sink)
    state: WatcherState = field(default_factory=WatcherState)

    def __post_init__(self) -> None:
        config = project()
        self.silences = Silences(self.store, self.clock)
        intake = CallbackIntake(
            store=self.store, clock=self.clock, service=config.service, sink=self.sink, silences=self.silences
        )
        self.pipeline = FiringPipeline(
            store=self.store,
            clock=self.clock,
            service=config.service,
            intake=intake,
            base_dir=config.base_dir,
            redactor=config.redactor,
        )
        self.spec = next(w.spec for w in config.watchers if w.spec.id == self.watcher_id)

    async def observe(self, value: int) -> Outcome:
        self.clock.advance(1)
        outcome = await self.pipeline.observe(
            self.spec, Observed(value={"v": value}, at=self.clock.now()), self.state
        )
        self.state = outcome.state
        return outcome

    async def silence(self, seconds: float = 3600, **matcher: Any) -> str:
        made = await self.silences.create(
            [Matcher(**(matcher or {"path": "watcherId", "op": "eq", "value": self.watcher_id}))],
            match="all",
            starts_at=None,
            ends_at=self.clock.now() + timedelta(seconds=seconds),
            comment="test",
            created_by="tests",
        )
        return made.id

    async def states(self) -> list[str]:
        page = await self.store.list_contracts(limit=500)
        return [c.state for c in reversed(page.items)]


async def rig(watcher_id: str = "edge") -> tuple[Rig, SqliteStore]:
    store = SqliteStore.in_memory()
    await store.open()
    return Rig(store, watcher_id), store


def what(outcome: Outcome) -> str | None:
    """``fired``, ``silenced`` (recorded now), or None."""
    if outcome.contract is None:
        return None
    return "fired" if outcome.fired else outcome.contract.state


async def test_an_edge_that_stays_true_under_a_silence_records_one_silenced_contract() -> None:
    """Five true observations under a silence: one silenced contract, no session."""
    r, store = await rig()
    try:
        silence_id = await r.silence()
        outcomes = [what(await r.observe(20)) for _ in range(5)]
        stored = (await store.list_contracts()).items
        assert (["silenced", None, None, None, None], [silence_id], []) == (
            outcomes,
            [c.silenced_by for c in stored],
            r.sink.submitted,
        )
    finally:
        await store.close()


async def test_an_edge_still_true_fires_on_the_first_observation_after_the_silence_expires() -> None:
    """Expiring the silence while the condition holds: the next observation fires."""
    r, store = await rig()
    try:
        silence_id = await r.silence()
        before = [what(await r.observe(20)) for _ in range(2)]
        await r.silences.expire(silence_id)
        after = [what(await r.observe(20)) for _ in range(2)]
        assert (["silenced", None], ["fired", None]) == (before, after)
    finally:
        await store.close()


async def test_an_edge_still_true_fires_when_the_silence_runs_out() -> None:
    """A silence that ends by itself (endsAt passes) lets the next observation fire."""
    r, store = await rig()
    try:
        await r.silence(seconds=2.5)
        kinds = [what(await r.observe(20)) for _ in range(4)]
        assert ["silenced", None, "fired", None] == kinds
    finally:
        await store.close()


async def test_a_new_episode_under_the_same_silence_records_again() -> None:
    """True, false, true under one silence: two silenced contracts, one per episode."""
    r, store = await rig()
    try:
        await r.silence()
        kinds = [what(await r.observe(v)) for v in (20, 20, 5, 20)]
        assert ["silenced", None, None, "silenced"] == kinds
    finally:
        await store.close()


async def test_a_silence_over_a_firing_edge_changes_nothing_until_it_resolves() -> None:
    """Fired before the silence: staying true does nothing, and no resolved or refire follows."""
    r, store = await rig()
    try:
        first = what(await r.observe(20))
        await r.silence()
        kinds = [first] + [what(await r.observe(v)) for v in (20, 20)]
        assert ["fired", None, None] == kinds
    finally:
        await store.close()


async def test_level_fires_under_a_silence_are_each_recorded() -> None:
    """A level-triggered watcher's muted fires are distinct: each is recorded."""
    r, store = await rig("level")
    try:
        await r.silence()
        kinds = [what(await r.observe(20)) for _ in range(3)]
        assert ["silenced", "silenced", "silenced"] == kinds
    finally:
        await store.close()


async def test_a_silence_on_another_watcher_does_not_mute() -> None:
    """Matchers decide: a silence of another watcher id leaves this one firing."""
    r, store = await rig()
    try:
        await r.silence(path="watcherId", op="eq", value="other")
        assert "fired" == what(await r.observe(20))
    finally:
        await store.close()


async def test_payload_matchers_see_the_observed_payload() -> None:
    """payload.<path> matchers are checked against the fire's payload."""
    r, store = await rig()
    try:
        await r.silence(path="payload.v", op="lt", value=100)
        kinds = [what(await r.observe(v)) for v in (50, 5, 500)]
        assert ["silenced", None, "fired"] == kinds
    finally:
        await store.close()


async def test_the_muted_episode_survives_a_restart_of_the_state() -> None:
    """The episode's silence is part of the persisted state: a reload does not record again."""
    r, store = await rig()
    try:
        await r.silence()
        await r.observe(20)
        r.state = WatcherState.from_json(r.state.to_json())
        assert (None, r.state.silenced_episode is not None) == (what(await r.observe(20)), True)
    finally:
        await store.close()


# -- the model ------------------------------------------------------------------------------------

Step = tuple[str, int]  # ("observe", value) | ("silence", seconds) | ("expire", 0) | ("wait", seconds)

steps = st.lists(
    st.one_of(
        st.tuples(st.just("observe"), st.sampled_from([5, 20])),
        st.tuples(st.just("silence"), st.integers(1, 6)),
        st.tuples(st.just("expire"), st.just(0)),
        st.tuples(st.just("wait"), st.integers(1, 4)),
    ),
    max_size=25,
)


async def play(script: list[Step]) -> None:
    """Run ``script`` and check every observation against the model of the edge."""
    r, store = await rig()
    firing = recorded = False  # the model: the edge consumed, the muted episode recorded
    silences: dict[str, datetime] = {}  # id -> ends at
    try:
        for step, arg in script:
            if step == "silence":
                silence_id = await r.silence(seconds=arg)
                silences[silence_id] = r.clock.now() + timedelta(seconds=arg)
            elif step == "expire" and silences:
                silence_id = next(iter(silences))
                await r.silences.expire(silence_id)
                silences[silence_id] = r.clock.now()
            elif step == "wait":
                r.clock.advance(arg)
            elif step == "observe":
                outcome = what(await r.observe(arg))
                now = r.clock.now()
                muted = any(now < ends for ends in silences.values())
                expected: str | None = None
                if arg <= 10:
                    firing = recorded = False
                elif not firing and muted:
                    expected, recorded = (None if recorded else "silenced"), True
                elif not firing:
                    expected, firing, recorded = "fired", True, False
                assert expected == outcome, (script, step, arg)
        contracts = await r.states()
        assert contracts.count("pending") == len(r.sink.submitted)
    finally:
        await store.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
def test_the_edge_model_holds_under_any_sequence_of_silences(script: list[Step]) -> None:
    """Fires, muted fires and re-arming follow the model, whatever silences come and go."""
    asyncio.run(play(script))
