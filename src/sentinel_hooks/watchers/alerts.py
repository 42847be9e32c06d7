"""The alerts of a ``format: alertmanager`` webhook watcher, each its own stream (SPEC.md §16).

One watcher receives many different alerts (an Alertmanager receiver routes a whole team's
alerts to it), so the watcher's own firing lifecycle (edge, repeat, resolved) would mix them up.
Instead each alert — its fingerprint and startsAt (``core.alertmanager``) — is an independent
stream with its own episode:

* a ``firing`` alert that matches the conditions fires once, under the callback id
  ``alert_callback_id`` makes from its identity. Alertmanager sends it again at every
  ``group_interval``/``repeat_interval`` while it fires: the callback then exists, and the repeat
  is recorded as an observation and fires nothing (not even a deduped contract). Because the
  callback id is the record, this holds across restarts and replicas (two replicas taking the
  same repeat at once: the store accepts one id once) for as long as the callback is kept
  (``retention.callbacksDays``); no other state is kept per alert.
* a fire held back by ``cooldownMs`` or a template error leaves no callback, so the alert's next
  repeat tries again; one refused by the dedupe window (an explicit ``dedupeKeyTemplate``
  shared with another alert) leaves a ``deduped`` callback and counts as handled.
* a fire a silence or maintenance window mutes (SPEC §14) is recorded once, as a ``silenced``
  callback under ``{id}.silenced``: the alert's own id stays free, so its first repeat after
  the silence fires it (the alert's edge is kept), and repeats during the silence find the
  silenced record and record nothing more.
* a ``resolved`` alert ends its stream: when its firing created a callback that went out (not
  deduped) and nothing paged yet, its contract settles ``resolved`` (no fallback, the session
  stopped, SPEC §6.4) with the "resolved before the agent answered" line as its page; after the
  page the resolved line goes to that callback's targets under its id as a follow-up (so it
  joins the fire's Slack thread, and a resent resolved alert is one delivery: the outbox keys it
  ``{callbackId}:{target}:resolved``). ``fire.notifyResolved: false`` sends neither line. The
  callback's open or acknowledged escalation items are resolved with actor ``source``.
* the conditions see each alert as the observation; ``changed`` compares it with the previous
  alert this watcher received, whatever its fingerprint. ``cooldownMs`` and ``fireOnce`` are the
  watcher's: a cooldown holds back every alert, fireOnce stops the watcher after its first fire.
* a notification's alerts are judged together (``judge_together``: their fires' store steps in
  flight at once, one round of writes rather than one after another under the watcher's lock)
  when nothing ties one alert's judgement to another's: each alert once in it, and no cooldown,
  fireOnce or ``dedupeKeyTemplate`` (the watcher's, shared by its alerts). Otherwise they are
  judged one after the other, in order. Judged together, the alerts that join an open group
  written out learn that they are repeats from the join itself (the store refuses an id it
  holds), so only the others' callbacks are read: a storm's notification then makes one trip
  to the store, not two.

The watcher's ``firing`` status flag stays false: its alerts fire and resolve on their own.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sentinel_hooks.config.watcher import AnyWatcher, WebhookWatcher
from sentinel_hooks.core.alertmanager import alert_callback_id, alert_duration_s, alert_name
from sentinel_hooks.core.checks import holds
from sentinel_hooks.core.paths import MISSING
from sentinel_hooks.errors import CallbackExists, Conflict, StoreError
from sentinel_hooks.events import Events
from sentinel_hooks.inbox.items import Inbox, ItemHook, callback_items
from sentinel_hooks.store.base import ContractStore, InboxStore
from sentinel_hooks.store.records import Contract, InboxItem
from sentinel_hooks.watchers.lifecycle import resolved_message
from sentinel_hooks.watchers.pipeline import UNKNOWN, FiringPipeline, Outcome, ResolvedHook, WrittenJoins
from sentinel_hooks.watchers.state import WatcherState
from sentinel_hooks.watchers.strategy import Observed

log = logging.getLogger(__name__)

SOURCE_ACTOR = "source"
RESOLVED_NOTE = "the alert was resolved at its source"
UNSENT = frozenset({"deduped"})  # a fire in these states reached nobody: nothing to resolve

ItemsResolver = Callable[[str], Awaitable[list[InboxItem]]]
"""Resolve a callback's open escalation items; the items resolved."""


async def _log_resolved(
    watcher: AnyWatcher, message: str | None, callback_id: str | None = None, *, settle: bool = True
) -> None:
    log.info("alert resolved", extra={"watcherId": watcher.id, "text": message, "callbackId": callback_id})


async def _no_items(callback_id: str) -> list[InboxItem]:
    return []


class InboxCloser:
    """Resolves the open (or acknowledged) escalation items of a callback, as the source; each
    item resolved is handed to ``audited`` (the service records it in the audit trail, via
    ``source``, SPEC §21)."""

    def __init__(self, inbox: Inbox, store: InboxStore, audited: ItemHook | None = None) -> None:
        self._inbox = inbox
        self._store = store
        self._audited = audited

    async def __call__(self, callback_id: str) -> list[InboxItem]:
        resolved: list[InboxItem] = []
        for item in await self._items(callback_id):
            try:
                moved = await self._inbox.resolve(item.id, actor=SOURCE_ACTOR, note=RESOLVED_NOTE)
            except Conflict:  # someone closed it meanwhile: nothing left to do
                continue
            resolved.append(moved)
            if self._audited is not None:
                await self._audited(moved)
        return resolved

    async def _items(self, callback_id: str) -> list[InboxItem]:
        """The callback's escalation items still open or acknowledged (newest first; bounded)."""
        return await callback_items(self._store, callback_id, ("open", "acked"))


class AlertStreams:
    """Runs one alert of a ``format: alertmanager`` watcher through conditions, fire and resolution."""

    def __init__(
        self,
        *,
        store: ContractStore,
        pipeline: FiringPipeline,
        on_resolved: ResolvedHook | None = None,
        resolve_items: ItemsResolver | None = None,
        events: Events | None = None,
    ) -> None:
        self._store = store
        self._pipeline = pipeline
        self._on_resolved = on_resolved or _log_resolved
        self._resolve_items = resolve_items or _no_items
        self._events = events

    async def observe(
        self, watcher: AnyWatcher, observed: Observed, state: WatcherState, *, previous: Any = UNKNOWN
    ) -> Outcome:
        """Process one alert (an observation from ``core.alertmanager.alert_observations``)."""
        previous = await self._pipeline.record(watcher.id, observed, previous)
        return await self.judge(watcher, observed, state, previous=previous)

    async def previous(self, watcher_id: str, previous: Any = UNKNOWN) -> Any:
        """The observation before a notification's alerts (``previous`` when the runner knows it)."""
        return await self._pipeline.previous(watcher_id, previous)

    async def record(self, watcher_id: str, alerts: list[Observed], state: dict[str, Any]) -> None:
        """Store the alerts of one notification as observations and the ``state`` they left, in one
        write that waits for no gathering window (a client waits for the 202)."""
        await self._pipeline.record_all(watcher_id, alerts, MISSING, prompt=True, state=state)

    @staticmethod
    def callback_ids(watcher_id: str, alerts: Sequence[Observed]) -> list[str]:
        """The callback id of each alert's stream, in order."""
        return [alert_callback_id(watcher_id, alert.value) for alert in alerts]

    async def callbacks(self, callback_ids: Sequence[str]) -> dict[str, Contract | None]:
        """The callbacks of the alerts' streams (None: not fired yet), read all at once rather than
        one per alert in turn under the watcher's lock; an alert that comes twice in the batch is
        left out (its second judgement reads the fire of its first)."""
        counts = Counter(callback_ids)
        return await self._read([callback_id for callback_id, count in counts.items() if count == 1], {})

    async def _read(
        self, callback_ids: Sequence[str], known: dict[str, Contract | None]
    ) -> dict[str, Contract | None]:
        """``known`` with the callbacks of ``callback_ids`` it lacks read in (None: not fired yet)."""
        unread = [callback_id for callback_id in callback_ids if callback_id not in known]
        found = await self._store.get_contracts(unread) if unread else {}
        known.update((callback_id, found.get(callback_id)) for callback_id in unread)
        return known

    async def judge(
        self,
        watcher: AnyWatcher,
        observed: Observed,
        state: WatcherState,
        *,
        previous: Any,
        known: Mapping[str, Contract | None] | None = None,
        callback_id: str | None = None,
    ) -> Outcome:
        """``observe`` of an alert already recorded (``record``); ``previous`` is the observation
        before it (MISSING for none), ``known`` the stream's callback when read already
        (``callbacks``), ``callback_id`` its id when made already (``callback_ids``)."""
        state = state.evolve(last_event_at=observed.at, quiet_fired=False)
        alert: dict[str, Any] = observed.value
        if callback_id is None:
            callback_id = alert_callback_id(watcher.id, alert)
        if alert.get("status") == "resolved":
            await self._resolved(watcher, observed, await self._fired(callback_id, known))
            self._evaluated(watcher, matched=False, fired=False)
            return Outcome(state)
        if not holds(watcher.conditions, watcher.match, alert, previous):
            self._evaluated(watcher, matched=False, fired=False)
            return Outcome(state)
        if await self._fired(callback_id, known) is not None:
            self._evaluated(watcher, matched=True, fired=False)
            return Outcome(state, skipped="repeat")
        try:
            outcome = await self._pipeline.fire_match(
                watcher, alert, previous, state, callback_id=callback_id
            )
        except CallbackExists:  # the same alert, taken at the same moment by another request or replica
            outcome = Outcome(state, skipped="repeat")
        self._evaluated(watcher, matched=True, fired=outcome.fired)
        return outcome

    @staticmethod
    def independent(watcher: AnyWatcher, callback_ids: Sequence[str]) -> bool:
        """Whether the alerts of one notification (their ``callback_ids``) may be judged together:
        each comes once and the watcher has no cooldown, fireOnce or dedupeKeyTemplate, the state
        one alert's fire leaves for the next."""
        fire = watcher.fire
        shared = watcher.cooldown_ms or watcher.fire_once or fire.dedupe_key_template is not None
        return not shared and len(set(callback_ids)) == len(callback_ids)

    async def judge_together(
        self,
        watcher: AnyWatcher,
        alerts: Sequence[Observed],
        state: WatcherState,
        *,
        previous: Any,
        callback_ids: Sequence[str],
    ) -> tuple[list[Outcome], WatcherState, BaseException | None]:
        """``judge`` every alert (``independent`` ones, under their ``callback_ids``) at once, each
        seeing the alert before it as ``previous``; the outcomes, in order, the state they left
        together (``merged_state``), and the first error (the others' fires are stored: a
        resent notification finds them repeats).

        Alerts that match and fire into a group this process saw open are first offered to it
        written out (``FiringPipeline.join_written``: a storm's joins without the models of a
        fire); one whose callback exists comes back a repeat. The callbacks of the ones it did
        not take are read at once, and they are judged as any other."""
        befores = [previous, *(alert.value for alert in alerts)][: len(alerts)]  # none for no alerts
        known: dict[str, Contract | None] = {}
        results = await self._join_written(watcher, alerts, befores, state, callback_ids, known)
        left = [index for index, result in enumerate(results) if result is None]
        try:
            await self._read([callback_ids[index] for index in left], known)
        except StoreError as exc:  # none of them judged: the notification fails, its resend judges them
            for index in left:
                results[index] = exc
            left = []
        judged = await asyncio.gather(
            *(
                self.judge(
                    watcher, alerts[i], state, previous=befores[i], known=known, callback_id=callback_ids[i]
                )
                for i in left
            ),
            return_exceptions=True,
        )
        for index, result in zip(left, judged, strict=True):
            results[index] = result
        outcomes = [result for result in results if isinstance(result, Outcome)]
        merged = merged_state(state, [outcome.state for outcome in outcomes])
        error = next((result for result in results if isinstance(result, BaseException)), None)
        return outcomes, merged, error

    async def _join_written(
        self,
        watcher: AnyWatcher,
        alerts: Sequence[Observed],
        befores: Sequence[Any],
        state: WatcherState,
        callback_ids: Sequence[str],
        known: dict[str, Contract | None],
    ) -> list[Outcome | BaseException | None]:
        """The outcome of each alert that joined its group written out, or that a fire of its
        callback took first (a repeat); None for the others (judged as usual). The callbacks
        read on the way are added to ``known``.

        An alert that found no group of its key open to it (none seen open, or the group closed
        before it: quiet, or full at ``maxFires``) and has not fired yet is judged whole first,
        alone: it opens the key's next group, as the first alert of a storm's notification does.
        The others left out for the same reason are offered again: a storm's first notification
        of a key then makes one whole fire, not fifty, and so does the one that fills a group.
        The rounds stop when one takes nothing."""
        offered: dict[str, int] = {}
        for index, (observed, before) in enumerate(zip(alerts, befores, strict=True)):
            alert: dict[str, Any] = observed.value
            if alert.get("status") != "resolved" and holds(watcher.conditions, watcher.match, alert, before):
                offered[callback_ids[index]] = index
        results: list[Outcome | BaseException | None] = [None] * len(alerts)
        first_round = True
        while offered:
            try:
                written = await self._pipeline.join_written(
                    watcher, [(callback_id, alerts[index].value) for callback_id, index in offered.items()]
                )
            except StoreError:  # nothing of this round was stored: judged whole, they meet the error again
                break
            self._joined(watcher, alerts, state, written, offered, results)
            if not (written.unopened and (first_round or written.joined)):
                break
            first_round = False
            try:
                await self._read(written.unopened, known)
            except StoreError:  # judged whole, they meet the error again
                break
            fresh = sorted((offered[callback_id], callback_id) for callback_id in written.unopened)
            fresh = [(at, callback_id) for at, callback_id in fresh if known[callback_id] is None]
            if not fresh:  # repeats of fires whose groups closed: judged whole, each a repeat
                break
            index, opener = fresh[0]  # the first of them in the notification opens the group
            try:
                results[index] = await self.judge(
                    watcher, alerts[index], state, previous=befores[index], known=known, callback_id=opener
                )
            except Exception as exc:  # as ``judge_together``'s gather would keep it
                results[index] = exc
            offered = {callback_id: at for at, callback_id in fresh[1:]}
        return results

    def _joined(
        self,
        watcher: AnyWatcher,
        alerts: Sequence[Observed],
        state: WatcherState,
        written: WrittenJoins,
        offered: Mapping[str, int],
        results: list[Outcome | BaseException | None],
    ) -> None:
        """Each alert ``written`` took, as its outcome in ``results``."""
        states: dict[datetime, tuple[WatcherState, WatcherState]] = {}  # by instant: a batch shares one
        for callback_id, group_id in written.joined.items():
            index = offered[callback_id]
            at = alerts[index].at
            if at not in states:
                seen = state.evolve(last_event_at=at, quiet_fired=False)
                fired = seen.evolve(silenced_episode=None, fires=seen.fires + 1, last_fire_at=written.now)
                states[at] = seen, fired
            seen, fired = states[at]
            if group_id is None:  # taken meanwhile by another request or replica
                results[index] = Outcome(seen, skipped="repeat")
            else:  # each counts its fire: ``merged_state`` adds them up
                results[index] = Outcome(fired, joined=group_id)
            self._evaluated(watcher, matched=True, fired=False)

    async def _fired(self, callback_id: str, known: Mapping[str, Contract | None] | None) -> Contract | None:
        """The callback of the alert's stream: from ``known`` when it holds it, else read now."""
        if known is not None and callback_id in known:
            return known[callback_id]
        return await self._store.get_contract(callback_id)

    async def _resolved(self, watcher: AnyWatcher, observed: Observed, fired: Contract | None) -> None:
        """The alert is over: tell its fire's targets and close its fire's escalation items.

        The line says how long the alert fired (endsAt - startsAt; since the fire when the source
        does not say)."""
        if fired is None or fired.state in UNSENT:
            return  # it never fired here (no match, held back, or a repeat of another's key)
        alert: dict[str, Any] = observed.value
        message: str | None = None
        if isinstance(watcher, WebhookWatcher) and watcher.notifies_resolved:
            seconds = alert_duration_s(alert)
            if seconds is None:
                seconds = max(0.0, (observed.at - fired.created_at).total_seconds())
            message = resolved_message(watcher.event_name, watcher.id, seconds)
            name = alert_name(alert)
            if name is not None:
                message = f"{message[:-1]} (alert {name})."
        await self._on_resolved(watcher, message, fired.callback_id)
        closed = await self._resolve_items(fired.callback_id)
        if closed:
            log.info(
                "alert resolved at its source: closed %d escalation item(s) of %s",
                len(closed),
                fired.callback_id,
                extra={"watcherId": watcher.id, "callbackId": fired.callback_id},
            )

    def _evaluated(self, watcher: AnyWatcher, *, matched: bool, fired: bool) -> None:
        if self._events is not None:
            self._events.evaluation(watcher.id, matched=matched, fired=fired, trigger=None)


def merged_state(before: WatcherState, afters: Sequence[WatcherState]) -> WatcherState:
    """The state that judgements which each started from ``before`` leave together: their fires
    counted, every other field as the last judgement that changed it left it."""
    changed: dict[str, Any] = {}
    was = before.__dict__
    for after in afters:
        for name, value in after.__dict__.items():
            if value is not was[name] and value != was[name]:  # most are the very same objects
                changed[name] = value
    changed.pop("fires", None)
    fires = before.fires + sum(after.fires - before.fires for after in afters)
    return before.evolve(fires=fires, **changed)
