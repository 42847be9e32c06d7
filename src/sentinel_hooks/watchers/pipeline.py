"""The firing pipeline (SPEC.md §1, §4): observation → conditions → lifecycle → fire.

For each observation: store it (history for ``changed`` and ``sentinel_history``),
evaluate the conditions against the previous one, advance the firing lifecycle, and on a
fire build the envelope (operatorGoalFile read now), apply cooldown, and hand it to the
intake (dedupe + durable contract + session queue). ``fireOnce`` then disables the watcher
durably. A template error is recorded on the watcher, which keeps running.

A fire that a silence or maintenance window mutes (SPEC §14) does not consume the watcher's edge:
the firing state and probe episodes stay as they were before the observation, so the fire is
due again on the next observation and goes out on the first one after the silence if the
conditions still hold. So that a lasting episode is recorded once, the state remembers what
muted it (``silenced_episode``) and later muted fires of the episode record nothing; it is
forgotten when an observation brings no fire (the conditions stopped matching) or a fire goes
out. Level-triggered fires are distinct events: each muted one is recorded.

A `command` probe's observation also advances its episodes (``episodes``): its trigger fires
once per episode whatever the conditions, and wins over a match of the same observation (one
fire per observation; the match's edge counts as fired). A probe error is not evaluated
against the conditions: it says nothing about the job.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel

from sentinel_hooks.callbacks.intake.intake import CallbackIntake
from sentinel_hooks.clock import Clock
from sentinel_hooks.config.grouping import group_rule
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.config.watcher import AnyWatcher, CommandWatcher
from sentinel_hooks.core.alertmanager import alert_dedupe_basis
from sentinel_hooks.core.checks import evaluate, holds
from sentinel_hooks.core.envelope import Route, TriggerKind
from sentinel_hooks.core.grouping import GroupRule
from sentinel_hooks.core.paths import MISSING
from sentinel_hooks.errors import TemplateError
from sentinel_hooks.events import Events
from sentinel_hooks.relay.fallback import Fanout, fanout_text
from sentinel_hooks.store.base import WatcherStore
from sentinel_hooks.store.records import Contract, GroupRequest, MemberJoin, Observation, utc_ms
from sentinel_hooks.store.shortcuts import last_observation
from sentinel_hooks.watchers.builder import Firing, build_envelope, render_variables
from sentinel_hooks.watchers.episodes import EpisodeDecision, advance
from sentinel_hooks.watchers.goalfile import GoalFileError, read_goal_file
from sentinel_hooks.watchers.kept import KeptByIdentity
from sentinel_hooks.watchers.lifecycle import Decision, resolved_message, step
from sentinel_hooks.watchers.state import WatcherState
from sentinel_hooks.watchers.strategies.probe_state import ProbeFailure
from sentinel_hooks.watchers.strategy import Observed
from sentinel_hooks.watchers.writeback import WatcherWrites
from sentinel_hooks.watchers.written import MemberTexts

log = logging.getLogger(__name__)

HISTORY_KEEP = 500
UNKNOWN: Any = object()  # "the caller does not know the previous observation": read it from the store


class ResolvedHook(Protocol):
    """A fire's condition ended: the watcher, the notifyResolved line (None: notifyResolved off),
    and the callback of the fire whose episode ended (None: unknown), which settles ``resolved``
    when nothing paged yet (SPEC §6.4) unless ``settle`` is false (a momentary fire, below)."""

    async def __call__(
        self, watcher: AnyWatcher, text: str | None, callback_id: str | None = None, *, settle: bool = True
    ) -> None: ...


_NO_DECISION = Decision()  # a probe error's: the conditions were not evaluated
_NO_EPISODE = EpisodeDecision()  # not a probe's observation
SILENCED = "silenced"  # Outcome.skipped: muted, and already recorded in this episode
SILENCED_SUFFIX = ".silenced"  # fire_match: the callback id a muted alert is recorded under


@dataclass(frozen=True)
class WrittenJoins:
    """What ``FiringPipeline.join_written`` did with the alerts offered: the instant of their fires;
    by callback id the group each joined, or None when its id exists (a repeat); and the ones
    left out only because no group of their key was open to them."""

    now: datetime
    joined: dict[str, str | None] = field(default_factory=dict)
    unopened: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Outcome:
    """What one observation did."""

    state: WatcherState
    contract: Contract | None = None
    skipped: str | None = None  # why a due fire was not sent (cooldown, template error)
    joined: str | None = None  # the group a fire written out joined (``join_written``: no contract made)

    @property
    def fired(self) -> bool:
        return self.contract is not None and self.contract.state == "pending"

    @property
    def silenced(self) -> bool:
        """Whether a silence or window muted the fire (recorded now, or earlier in its episode)."""
        recorded = self.contract is not None and self.contract.state == "silenced"
        return recorded or self.skipped == SILENCED


@dataclass(frozen=True)
class Unfired:
    """The watcher state before an observation's lifecycle step (what a muted fire keeps), and
    whether muted fires of one episode are recorded once (edge, probe and quiet triggers) or each
    (level)."""

    state: WatcherState
    once: bool


def _remember_fire(outcome: Outcome) -> Outcome:
    """The firing state after an accepted ``match`` fire names its callback (for the resolved line)."""
    if not outcome.fired or outcome.contract is None:
        return outcome
    firing = replace(outcome.state.firing, callback_id=outcome.contract.callback_id)
    return replace(outcome, state=outcome.state.evolve(firing=firing))


EXPLAINED_VALUE_CHARS = 200  # an actual value longer than this (as JSON) is kept cut, as text


def _shown(value: Any) -> Any:
    """``value`` as kept in a fire's explanation: itself when short, else its JSON cut."""
    text = json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
    return value if len(text) <= EXPLAINED_VALUE_CHARS else text[: EXPLAINED_VALUE_CHARS - 1] + "…"


def momentary(watcher: AnyWatcher) -> bool:
    """Whether the watcher's fire marks a moment rather than a state: a condition on ``changed``
    holds for the one observation that saw the change, so its turning false the next poll says
    nothing is over, and must not settle the fire ``resolved`` before its page (SPEC §6.4)."""
    return any(_uses_changed(node) for node in watcher.conditions)


def _uses_changed(node: Any) -> bool:
    if isinstance(node, BaseModel):
        node = node.model_dump()
    if isinstance(node, dict):
        return node.get("op") == "changed" or any(_uses_changed(v) for v in node.values())
    if isinstance(node, list):
        return any(_uses_changed(v) for v in node)
    return False


async def _no_resolved_hook(
    watcher: AnyWatcher, message: str | None, callback_id: str | None = None, *, settle: bool = True
) -> None:
    log.info("watcher resolved", extra={"watcherId": watcher.id, "text": message, "callbackId": callback_id})


class FiringPipeline:
    """Turns observations of one service's watchers into callbacks."""

    def __init__(
        self,
        *,
        store: WatcherStore,
        clock: Clock,
        service: ServiceConfig,
        intake: CallbackIntake,
        base_dir: Path,
        redactor: Redactor,
        on_resolved: ResolvedHook | None = None,
        events: Events | None = None,
        writes: WatcherWrites | None = None,
    ) -> None:
        """``writes`` batches the observation writes of many polls (None: one store call each)."""
        self._store = store
        self._writes = writes
        self._clock = clock
        self._service = service
        self._intake = intake
        self._base_dir = base_dir
        self._redactor = redactor
        self._on_resolved = on_resolved or _no_resolved_hook
        self._events = events
        self._rules: KeptByIdentity[GroupRule | None] = KeptByIdentity()  # _group_rule
        self._texts: KeptByIdentity[MemberTexts | None] = KeptByIdentity()  # join_written

    async def observe(
        self,
        watcher: AnyWatcher,
        observed: Observed,
        state: WatcherState,
        *,
        previous: Any = UNKNOWN,
        prompt: bool = False,
        recorded: bool = False,
    ) -> Outcome:
        """Process one observation; returns the new state (not yet persisted) and any contract.

        ``previous`` is the watcher's previous observation when the caller remembers it
        (MISSING for none); by default it is read from the store. ``prompt``: a pushed event,
        recorded without waiting for the write-back's window (``watchers.writeback``).
        ``recorded``: the caller stores the observation itself, after judging it (with others
        and the state they left: ``record_all``), and gives ``previous``.
        """
        if not recorded:
            previous = await self.record(watcher.id, observed, previous, prompt=prompt)
        state = state.evolve(last_event_at=observed.at, quiet_fired=False)
        unfired = state  # what a muted fire leaves: the edge and episodes as they were
        episode = _NO_EPISODE
        if observed.probe is not None:
            episode, episodes = advance(
                state.probe_episodes,
                observed.probe,
                observed.trigger,
                now=observed.at,
                repeat_interval_ms=watcher.fire.repeat_interval_ms,
            )
            state = state.evolve(probe_episodes=episodes)
        matched, decision, last_fire = False, _NO_DECISION, state.firing.callback_id
        if not isinstance(observed.probe, ProbeFailure):  # a probe error tells the conditions nothing
            matched, decision, state = self._conditions(watcher, observed, previous, state)
        if decision.resolved_after_s is not None or episode.resolved_after_s is not None:
            await self._resolved(watcher, decision, episode, last_fire)
        if self._events is not None:
            fired = decision.fire or episode.fire is not None
            self._events.evaluation(watcher.id, matched=matched, fired=fired, trigger=observed.trigger)
        if episode.fire is not None:  # it also stands for a match of this observation
            outcome = await self._fire(
                watcher,
                episode.fire,
                observed.value,
                previous,
                state,
                repeat=episode.repeat,
                unfired=Unfired(unfired, once=True),
            )
            return _remember_fire(outcome) if decision.fire else outcome
        if not decision.fire:
            return Outcome(state.evolve(silenced_episode=None) if state.silenced_episode else state)
        once = watcher.trigger_mode == "edge"
        outcome = await self._fire(
            watcher,
            "match",
            observed.value,
            previous,
            state,
            repeat=decision.repeat,
            unfired=Unfired(unfired, once=once),
        )
        return _remember_fire(outcome)

    async def record(
        self, watcher_id: str, observed: Observed, previous: Any = UNKNOWN, *, prompt: bool = False
    ) -> Any:
        """Store the observation (and ack it to its source); the previous one (``previous`` when
        the caller knows it, else read from the store first; MISSING for none)."""
        return await self.record_all(watcher_id, [observed], previous, prompt=prompt)

    async def record_all(
        self,
        watcher_id: str,
        observed: list[Observed],
        previous: Any = UNKNOWN,
        *,
        prompt: bool = False,
        state: dict[str, Any] | None = None,
    ) -> Any:
        """``record`` for several observations of one watcher in one write (the alerts of one
        notification), with the watcher's ``state`` when given: stored in order, each acked; the
        observation before the first."""
        previous = await self.previous(watcher_id, previous)
        observations = [Observation(at=item.at, value=item.value) for item in observed]
        if self._writes is not None:
            await self._writes.observations(watcher_id, observations, prompt=prompt, state=state)
        else:
            batch = [(watcher_id, observation) for observation in observations]
            await self._store.write_watcher_batch(
                batch, {} if state is None else {watcher_id: state}, keep=HISTORY_KEEP
            )
        for item in observed:
            if item.ack is not None:
                await item.ack()
        return previous

    async def previous(self, watcher_id: str, previous: Any = UNKNOWN) -> Any:
        """``previous`` when the caller knows the watcher's last observation, else the one stored
        (MISSING for none)."""
        if previous is UNKNOWN:
            last = await last_observation(self._store, watcher_id)
            previous = last.value if last is not None else MISSING
        return previous

    async def fire_match(
        self, watcher: AnyWatcher, payload: Any, previous: Any, state: WatcherState, *, callback_id: str
    ) -> Outcome:
        """A ``match`` fire under ``callback_id`` outside the firing lifecycle (an alert of a
        ``format: alertmanager`` watcher, ``watchers.alerts``); cooldown, dedupe, silences and
        fireOnce apply. A silenced fire is recorded under ``{callback_id}.silenced``, leaving the id
        to the alert's fire after the silence. ``CallbackExists`` when the id it needs is taken.

        With no ``dedupeKeyTemplate`` the store keeps no dedupe key for the fire: the default key
        hashes the alert's identity (``alert_dedupe_basis``), which names its callback too
        (``alert_callback_id``), so the store refusing a taken id already refuses every fire the
        key would, and for longer (callbacks outlive the dedupe window). A storm's every alert
        saves a write to a randomly placed key."""
        return await self._fire(
            watcher,
            "match",
            payload,
            previous,
            state,
            repeat=watcher.fire.dedupe_key_template is None and alert_dedupe_basis(payload) is not payload,
            callback_id=callback_id,
            silenced_callback_id=f"{callback_id}{SILENCED_SUFFIX}",
        )

    async def join_written(
        self, watcher: AnyWatcher, alerts: Sequence[tuple[str, dict[str, Any]]]
    ) -> WrittenJoins:
        """Alerts that match and fire for the first time (each ``(callback id, alert)``), offered to
        the open groups of their keys written out (``watchers.written``). An alert left out (its
        key's group not seen open here, the watcher's or the alert's texts not written out this
        way, a silence or window active, traces on, the group closed or full) is for
        ``fire_match``, which accepts it whole; those left out only because no group of their
        key was open to them (none seen open, or it closed before them: quiet or full) are named
        (``WrittenJoins.unopened``): once one of them has opened a group, the others of its key
        may join it written out."""
        now = utc_ms(self._clock.now())
        rule = self._group_rule(watcher)
        if rule is None or not await self._intake.may_join_written():
            return WrittenJoins(now)
        intake, service = self._intake, self._service
        texts = self._texts.get((watcher, service), lambda: MemberTexts.of(watcher, service, rule, intake))
        if texts is None:
            return WrittenJoins(now)
        by_key: dict[str, list[MemberJoin]] = {}
        unopened: list[str] = []
        for callback_id, alert in alerts:
            key = texts.key(alert)
            if not intake.group_open(key):
                unopened.append(callback_id)
                continue
            member = texts.member(alert, callback_id, key, now, self._redactor)
            if member is not None:
                by_key.setdefault(key, []).append(member)
        answers = await asyncio.gather(
            *(
                intake.join_written(GroupRequest(key, rule.interval_ms, rule.max_fires), members)
                for key, members in by_key.items()
            )
        )
        joined: dict[str, str | None] = {}
        for members, groups in zip(by_key.values(), answers, strict=True):
            joined.update((m.callback_id, group_id) for m, group_id in zip(members, groups, strict=False))
            unopened += (m.callback_id for m in members[len(groups) :])  # their group closed before them
        return WrittenJoins(now, joined, unopened)

    @staticmethod
    def _conditions(
        watcher: AnyWatcher, observed: Observed, previous: Any, state: WatcherState
    ) -> tuple[bool, Decision, WatcherState]:
        """Whether the conditions match, and the firing lifecycle's decision and state after it."""
        conditional = not (isinstance(watcher, CommandWatcher) and not watcher.conditions)
        matched = conditional and holds(watcher.conditions, watcher.match, observed.value, previous)
        decision, firing = step(
            state.firing,
            matched,
            mode=watcher.trigger_mode,
            now=observed.at,
            repeat_interval_ms=watcher.fire.repeat_interval_ms,
            notify_resolved=watcher.fire.notify_resolved,
        )
        return matched, decision, state if firing is state.firing else state.evolve(firing=firing)

    async def _resolved(
        self, watcher: AnyWatcher, decision: Decision, episode: EpisodeDecision, fired: str | None
    ) -> None:
        """A fired condition or a probe episode ended: the hook gets the notifyResolved line (the
        longer of the two; None when off) and ``fired``, the callback of the condition's last fire
        (probe episodes keep none), whose contract settles ``resolved`` if nothing paged yet."""
        ended = [decision.resolved_after_s] if decision.resolved else []
        if watcher.fire.notify_resolved:
            ended.append(episode.resolved_after_s)
        durations = [seconds for seconds in ended if seconds is not None]
        message = resolved_message(watcher.event_name, watcher.id, max(durations)) if durations else None
        callback_id = fired if decision.resolved_after_s is not None else None
        settle = not momentary(watcher)
        if message is not None or (callback_id is not None and settle):
            await self._on_resolved(watcher, message, callback_id, settle=settle)

    async def quiet(self, watcher: AnyWatcher, state: WatcherState) -> Outcome:
        """``expectEventWithinMs`` passed with no event: fire a ``no_progress`` trigger once."""
        now = self._clock.now()
        payload = {
            "quietForMs": watcher.expect_event_within_ms,
            "lastEventAt": state.last_event_at.isoformat() if state.last_event_at else None,
        }
        outcome = await self._fire(
            watcher, "no_progress", payload, MISSING, state, repeat=False, unfired=Unfired(state, once=True)
        )
        # a muted quiet fire is due again a window later (and goes out once the silence ends)
        return replace(
            outcome, state=outcome.state.evolve(quiet_fired=not outcome.silenced, last_event_at=now)
        )

    async def fire_beat(
        self,
        watcher: AnyWatcher,
        kind: TriggerKind,
        payload: Any,
        state: WatcherState,
        *,
        callback_id: str | None = None,
    ) -> Outcome:
        """A heartbeat's fire (``no_progress`` a missed period, ``terminal`` failed), under
        ``callback_id`` when given (a period's own; muted, recorded under ``{callback_id}.silenced``).
        ``CallbackExists`` when that id is taken."""
        return await self._fire(
            watcher,
            kind,
            payload,
            MISSING,
            state,
            repeat=False,
            unfired=Unfired(state, once=True),
            callback_id=callback_id,
            silenced_callback_id=None if callback_id is None else f"{callback_id}{SILENCED_SUFFIX}",
        )

    async def resolve_beat(self, watcher: AnyWatcher, callback_id: str | None, seconds: float) -> None:
        """A heartbeat's fire ended with a success ping: the resolved line (when notifyResolved)
        and the fire's callback, settled ``resolved`` if nothing paged yet (SPEC §6.4)."""
        notify = getattr(watcher, "notifies_resolved", watcher.fire.notify_resolved)
        message = resolved_message(watcher.event_name, watcher.id, seconds) if notify else None
        if message is not None or callback_id:
            await self._on_resolved(watcher, message, callback_id or None, settle=True)

    async def fire_manual(self, watcher: AnyWatcher, payload: Any, state: WatcherState) -> Outcome:
        """A manual fire: no conditions, lifecycle, cooldown or fireOnce — but dedupe applies."""
        return await self._fire(
            watcher, "manual", payload, MISSING, state, repeat=False, route="manual", manual=True
        )

    def _group_rule(self, watcher: AnyWatcher) -> GroupRule | None:
        """``group_rule`` of the watcher, made once per watcher spec rather than per fire (a storm's
        every alert asks)."""
        grouping = self._service.grouping
        return self._rules.get((watcher,), lambda: group_rule(watcher.id, grouping, watcher.fire.group))

    async def _fire(
        self,
        watcher: AnyWatcher,
        kind: TriggerKind,
        payload: Any,
        previous: Any,
        state: WatcherState,
        *,
        repeat: bool,
        route: Route = "watcher",
        manual: bool = False,
        callback_id: str | None = None,
        unfired: Unfired | None = None,
        silenced_callback_id: str | None = None,
    ) -> Outcome:
        """Build the envelope and hand it to the intake. ``unfired`` (not for manual fires) is the
        state a muted fire leaves behind, and whether its episode is recorded once.
        ``callback_id`` names the fire's callback (else a new ULID), ``silenced_callback_id`` the
        callback a muted fire is recorded under instead (so ``callback_id`` stays free for the
        fire after the silence)."""
        now = self._clock.now()
        if not manual and self._cooling_down(watcher, state, now):
            return Outcome(state, skipped="cooldown")
        context = self._goal_context(watcher)
        firing = Firing(
            kind=kind, payload=payload, at=now, previous=previous, route=route, runtime_context=context
        )
        try:
            envelope = build_envelope(
                watcher, self._service, firing, redactor=self._redactor, callback_id=callback_id
            )
        except TemplateError as exc:
            error = self._redactor.text(f"template error at fire time: {exc}")
            log.warning(error, extra={"watcherId": watcher.id})
            return Outcome(state.evolve(last_error=error), skipped="template")
        silenced_by = await self._intake.silenced_by(envelope)
        errors: list[str] = []

        def details() -> tuple[Fanout, list[dict[str, Any]] | None]:
            """The fan-out line and explanation, made only for a fire that is not a lean join."""
            fanout, message_error = self._fanout(watcher, firing)
            errors.extend([message_error] if message_error is not None else [])
            return fanout, self._explained(watcher, payload, previous) if kind == "match" else None

        rule = self._group_rule(watcher)
        fanout, conditions = (None, None) if rule is not None and silenced_by is None else details()
        if errors:
            state = state.evolve(last_error=errors[0])
        if silenced_by is not None and silenced_callback_id is not None:
            envelope = envelope.model_copy(update={"callback_id": silenced_callback_id})
        if silenced_by is not None and unfired is not None:
            kept = state.evolve(
                firing=unfired.state.firing,
                probe_episodes=unfired.state.probe_episodes,
                silenced_episode=silenced_by if unfired.once else None,
            )
            if unfired.once and state.silenced_episode is not None:
                return Outcome(kept.evolve(silenced_episode=state.silenced_episode), skipped=SILENCED)
            state = kept
        contract = await self._intake.accept(
            envelope,
            session_group=watcher.fire.session_group,
            bypass_dedupe=repeat,
            fanout=fanout,
            silenced_by=silenced_by,
            conditions=conditions,
            group=rule,
            details=details if fanout is None else None,
        )
        if errors and fanout is None:  # made by the intake: a fire that did not join
            state = state.evolve(last_error=errors[0])
        if contract.state == "silenced":
            return Outcome(state, contract=contract)
        state = state.evolve(silenced_episode=None)
        if contract.state not in ("pending", "grouped"):
            return Outcome(state, contract=contract)
        state = state.evolve(fires=state.fires + 1, last_fire_at=now)
        if watcher.fire_once and not manual:
            state = state.evolve(enabled=False, disabled_reason="fireOnce")
        return Outcome(state, contract=contract)

    def _explained(self, watcher: AnyWatcher, payload: Any, previous: Any) -> list[dict[str, Any]]:
        """Each leaf condition of a match with its actual value and result (secrets masked, a
        long value cut), kept with the fire so ``sentinel callbacks show`` can say why it fired.
        Evaluated once more here: a fire is rare next to the observations that did not fire."""
        results = evaluate(watcher.conditions, watcher.match, payload, previous).results
        return [
            self._redactor.data(
                {
                    "path": r.path,
                    "op": r.op,
                    "value": r.value,
                    "actual": None if r.missing else _shown(r.actual),
                    "missing": r.missing,
                    "result": r.result,
                }
            )
            for r in results
        ]

    def _fanout(self, watcher: AnyWatcher, firing: Firing) -> tuple[Fanout, str | None]:
        """The fan-out mode and line (messageTemplate rendered); a template error is returned, not raised."""
        mode = watcher.fire.notification_payload_mode
        if mode == "inherit":
            mode = self._service.notification_payload_mode
        rendered, error = None, None
        template = watcher.fire.compiled_message
        if template is not None:
            try:
                rendered = template.render(render_variables(watcher, firing))
            except TemplateError as exc:
                error = self._redactor.text(f"messageTemplate error at fire time: {exc}")
        text = fanout_text(event_name=watcher.event_name, watcher_id=watcher.id, rendered=rendered)
        return Fanout(mode, text, error, rendered), error

    @staticmethod
    def _cooling_down(watcher: AnyWatcher, state: WatcherState, now: datetime) -> bool:
        """Whether ``cooldownMs`` has not yet passed since the last fire."""
        last = state.last_fire_at
        return (
            bool(watcher.cooldown_ms)
            and last is not None
            and now - last < timedelta(milliseconds=watcher.cooldown_ms)
        )

    def _goal_context(self, watcher: AnyWatcher) -> str | None:
        """operatorGoalFile's text, read now; an unreadable file is said, never fatal (people must hear)."""
        goal_file = watcher.fire.operator_goal_file
        if goal_file is None:
            return None
        try:
            return read_goal_file(self._base_dir, goal_file)
        except GoalFileError as exc:
            log.warning(str(exc), extra={"watcherId": watcher.id})
            return f"(operatorGoalFile could not be read: {exc})"
