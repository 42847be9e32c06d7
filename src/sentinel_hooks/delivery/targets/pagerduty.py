"""The ``pagerduty`` target: PagerDuty Events API v2 (SPEC.md §16).

One event per message, POSTed as JSON to ``{apiBase}/v2/enqueue`` through ``SafeHttp``. The
``dedup_key`` is the message's callback id, so everything about one fire is one PagerDuty alert:

- the agent's notify (``notify``, ``notify.N``), the fallback and escalation steps (``escalation.N``,
  whose callback id is the inbox item's callback) ``trigger`` it; PagerDuty merges triggers with an
  open alert's dedup_key, so a retry, a second notify or a later step never pages twice;
- the resolved message (its callback id is the fire whose episode ended) ``resolve``s it, and
  no ``trigger`` of that dedup_key follows, ever (SPEC §16): PagerDuty would open a new incident
  that nothing closes. Before the ``resolve`` is sent the target marks the dedup_key resolved (the
  store's checkpoint ``pagerduty-resolved:{target}:{callbackId}``, pruned with its callback, so it
  holds across restarts and replicas), and a later trigger of it (a fallback or follow-up still
  being retried, an escalation step) is accepted without a request. In a process the messages of
  one callback go one at a time (``KeyedLocks``), so a trigger in flight finishes before the
  resolve; replicas share no lock, so a trigger already sent by another replica can still land
  just after it. A trigger refused so raises ``CancelledDelivery``: its delivery ends
  ``cancelled`` with the reason, not ``delivered``;
- the fan-out line is not sent (accepted as is): it goes out on every fire before the agent has
  looked, and paging then would take the decision away from the agent; the notify or the
  fallback pages.

Pacing (SPEC §16): at most ``PACE_LIMIT`` events in any ``PACE_WINDOW_MS`` per routing key,
PagerDuty's documented limit. Each event first takes a slot of the store's window for the key
(``PaceStore.take_pace_slot``; the key is a hash of the routing key, never the key itself), so
every replica and every restart counts the same sends. Without a free slot the store reserves the
next one for the delivery (its Idempotency-Key is the holder) and the target raises
``DeferredDelivery(until)``: the outbox keeps the delivery pending until its slot (no attempt
counted), so a storm's events wait in the store, go out in the order they first asked, one store
write each while waiting, and none is dropped. The resolve marks its dedup_key resolved before it
waits for a slot, so a trigger still queued behind it is cancelled, never sent after it. Without
a store (tests) nothing is paced.

``severity`` comes from the priority (critical → critical, high → error, normal → warning,
low → info), ``summary`` is the message's first line (at most 1024 characters), ``source`` the
watcher, ``custom_details`` the observed payload (``Message.payload``, already cut and redacted).
PagerDuty answers 202; 429 and 5xx are retried by the dispatcher (Retry-After honoured), any
other 4xx is not. The routing key is a secret: it is never in an error text.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from sentinel_hooks import __version__
from sentinel_hooks.clock import iso
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.targets import PagerDutyTargetSpec, TargetSpec
from sentinel_hooks.delivery.targets.base import (
    CancelledDelivery,
    DeferredDelivery,
    DeliveryError,
    Message,
    Target,
    TargetContext,
    delivery_error,
)
from sentinel_hooks.delivery.targets.slack_threads import KeyedLocks
from sentinel_hooks.delivery.targets.webhook import shown_url, status_failure
from sentinel_hooks.net.errors import HttpStatusError, NetError
from sentinel_hooks.net.response import raise_for_status
from sentinel_hooks.store.shortcuts import get_checkpoint

SUMMARY_CHARS = 1024  # PagerDuty's limit for payload.summary
SEVERITIES = {"critical": "critical", "high": "error", "normal": "warning", "low": "info"}
DEFAULT_SEVERITY = "warning"
SKIPPED_KINDS = frozenset({"fanout"})
PACE_LIMIT = 120  # events per routing key …
PACE_WINDOW_MS = 60_000  # … in any window this long (PagerDuty's documented Events API limit)
log = logging.getLogger(__name__)


RESOLVED_PREFIX = "pagerduty-resolved:"


def resolved_prefix(target: str) -> str:
    """The checkpoint key of ``target``'s resolved dedup_keys, less the callback id (what
    retention prunes)."""
    return f"{RESOLVED_PREFIX}{target}:"


def pace_key(routing_key: str) -> str:
    """The pacing window's key for ``routing_key``: a hash, so the secret never reaches the store."""
    return "pagerduty:" + hashlib.sha256(routing_key.encode("utf-8")).hexdigest()[:32]


def event_action(kind: str) -> str | None:
    """What a message of ``kind`` does to the alert: ``resolve``, ``trigger``, or None (not sent)."""
    if kind == "resolved":
        return "resolve"
    if kind in SKIPPED_KINDS:
        return None
    return "trigger"


def summary(text: str) -> str:
    """The first non-empty line of ``text``, at most ``SUMMARY_CHARS`` characters (never empty)."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if len(first) > SUMMARY_CHARS:
        first = first[: SUMMARY_CHARS - 1] + "…"
    return first or "Sentinel alert"


def event_body(message: Message, routing_key: str, action: str) -> dict[str, Any]:
    """The Events API v2 object for ``message``."""
    body: dict[str, Any] = {
        "routing_key": routing_key,
        "event_action": action,
        "dedup_key": message.callback_id,
    }
    if action != "trigger":
        return body
    payload: dict[str, Any] = {
        "summary": summary(message.text),
        "source": message.watcher_id or "sentinel",
        "severity": SEVERITIES.get(message.priority, DEFAULT_SEVERITY),
        "component": message.event_name,
        "class": message.kind,
    }
    details = message.payload
    if details is not None:
        payload["custom_details"] = details if isinstance(details, dict) else {"payload": details}
    body["payload"] = payload
    body["client"] = "Sentinel"
    link = message.extra.get("link")
    if isinstance(link, str) and link:
        body["links"] = [{"href": link, "text": "Sentinel inbox item"}]
    return body


class PagerDutyTarget:
    """Sends Events API v2 events through the service's ``SafeHttp``; one attempt per ``send``."""

    def __init__(self, name: str, spec: PagerDutyTargetSpec, context: TargetContext) -> None:
        self.name = name
        self.follow_ups = spec.takes_follow_ups()
        self._context = context
        self._url = spec.enqueue_url()
        self._routing_key = spec.routing_key.get_secret_value()
        self._redactor = Redactor([self._routing_key])
        self._pace_key = pace_key(self._routing_key)
        self._where = f"pagerduty target {name!r} ({shown_url(self._url)})"
        self._headers = {"Content-Type": "application/json", "User-Agent": f"sentinel-hooks/{__version__}"}
        self._locks = KeyedLocks()
        self._resolved: set[str] = set()  # without a store: this process's resolved dedup_keys

    async def send(self, message: Message, *, idempotency_key: str) -> None:
        """Trigger or resolve the alert of ``message``'s callback (see the module docstring)."""
        action = event_action(message.kind)
        if action is None:
            log.debug("%s: %s not sent (%s pages nobody)", self._where, idempotency_key, message.kind)
            return
        async with self._locks.hold(message.callback_id):
            if action == "resolve":
                await self._mark_resolved(message.callback_id)
            elif await self._was_resolved(message.callback_id):
                log.info(
                    "%s: %s not sent (its alert was resolved: no trigger after resolve)",
                    self._where,
                    idempotency_key,
                    extra={"callbackId": message.callback_id},
                )
                raise CancelledDelivery(
                    f"{self._where}: not sent, its alert was resolved (no trigger after resolve)"
                )
            await self._take_slot(idempotency_key)
            await self._post(message, action)

    async def _take_slot(self, holder: str) -> None:
        """Take a slot of the routing key's pace for ``holder`` (the delivery), or raise
        ``DeferredDelivery`` until the slot reserved for it."""
        store = self._context.store
        if store is None:
            return
        now = self._context.clock.now()
        free_at = await store.take_pace_slot(
            self._pace_key, holder=holder, limit=PACE_LIMIT, window_ms=PACE_WINDOW_MS, at=now
        )
        if free_at is not None:
            raise DeferredDelivery(
                f"{self._where}: {PACE_LIMIT} events in {PACE_WINDOW_MS // 1000} s, waiting for a slot",
                until=free_at,
            )

    async def _mark_resolved(self, dedup_key: str) -> None:
        store = self._context.store
        if store is None:
            self._resolved.add(dedup_key)
            return
        at = iso(self._context.clock.now())
        await store.put_checkpoint(resolved_prefix(self.name) + dedup_key, {"resolvedAt": at})

    async def _was_resolved(self, dedup_key: str) -> bool:
        store = self._context.store
        if store is None:
            return dedup_key in self._resolved
        return await get_checkpoint(store, resolved_prefix(self.name) + dedup_key) is not None

    async def _post(self, message: Message, action: str) -> None:
        try:
            data = json.dumps(event_body(message, self._routing_key, action), ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise DeliveryError(f"{self._where}: the message is not JSON ({exc})") from exc
        try:
            response = await self._context.http.request(
                "POST", self._url, headers=self._headers, data=data.encode("utf-8")
            )
        except NetError as exc:
            raise delivery_error(self._redactor.text(f"{self._where}: {exc.reason}"), like=exc) from exc
        try:
            raise_for_status(response)
        except HttpStatusError as exc:
            reason = self._redactor.text(f"{self._where}: PagerDuty answered {exc.reason}")
            raise status_failure(reason, exc.status, exc.retry_after_s) from exc

    async def close(self) -> None:
        """Nothing to release: the ``SafeHttp`` client belongs to the service."""


def create(name: str, spec: TargetSpec, context: TargetContext) -> Target:
    """The ``pagerduty`` target called ``name``."""
    if not isinstance(spec, PagerDutyTargetSpec):
        raise TypeError(f"target {name!r}: expected a pagerduty spec, got {type(spec).__name__}")
    return PagerDutyTarget(name, spec, context)
