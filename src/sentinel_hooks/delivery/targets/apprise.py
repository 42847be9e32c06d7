"""The ``apprise`` target: any service the Apprise library supports, by URL (SPEC.md §16).

E-mail, Microsoft Teams (Workflows), Telegram, ntfy, Discord, a JSON endpoint … are Apprise's
notifiers, not Sentinel code. Each configured URL gets its own ``apprise.Apprise`` object, and a
send notifies every URL at once with ``Apprise.async_notify``, which runs the notifiers' blocking
HTTP and SMTP calls in Apprise's worker threads, so the event loop never waits on them; the
whole send is bounded by the request timeout (``limits.requestTimeoutMs``).

What the dispatcher sees. Apprise tells only whether a URL's notifier succeeded, so a failure is
transient (retried up to ``delivery.maxAttempts``) — unless the host policy refused the
connection (``net.guard`` applies allowedHosts and the private-address rule to every
connection a notifier makes), which will not pass by itself. With several URLs, the URLs that
already took a delivery are remembered (in memory, by Idempotency-Key) and a retry goes only to
the others; after a restart, or on another replica, a retry goes to all of them again.

Secrets: a URL holds its service's credentials. Error texts name a URL by Apprise's privacy form
and mask every part Apprise hides there (``config.apprise_urls``); Apprise's own log lines are
kept out of Sentinel's logs and reach error texts only redacted. Apprise keeps no files (its
persistent store is in memory) and loads no plugins from the user's directories.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

import apprise

from sentinel_hooks.config.apprise_urls import parse_apprise_url, quiet_apprise_logs
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.targets import AppriseTargetSpec, TargetSpec
from sentinel_hooks.delivery.targets.base import (
    DeliveryError,
    Message,
    Target,
    TargetContext,
    TransientDeliveryError,
)
from sentinel_hooks.net.guard import guarded

REASON_CHARS = 300  # the most of Apprise's log lines quoted per failed URL
REMEMBERED_KEYS = 1000  # deliveries whose partly done URLs are remembered between attempts


def notify_type(message: Message) -> apprise.NotifyType:
    """How Apprise styles the message: success for resolved, failure for critical, warning for a
    fallback, an escalation or high priority, info otherwise."""
    if message.kind == "resolved":
        return apprise.NotifyType.SUCCESS
    if message.priority == "critical":
        return apprise.NotifyType.FAILURE
    if message.priority == "high" or message.kind == "fallback" or message.kind.startswith("escalation"):
        return apprise.NotifyType.WARNING
    return apprise.NotifyType.INFO


def title(message: Message) -> str:
    """``Sentinel: {eventName} on {watcherId}`` (without the watcher when there is none)."""
    where = f" on {message.watcher_id}" if message.watcher_id else ""
    return f"Sentinel: {message.event_name}{where}"


def body(message: Message) -> str:
    """The message's text, then a line saying what it is: kind, priority and callback."""
    return f"{message.text}\n\n{message.kind} · {message.priority} · callback {message.callback_id}"


@dataclass(frozen=True)
class Failed:
    """One URL that did not take the message, and whether trying again may help."""

    shown: str
    reason: str
    refused: bool  # the host policy refused a connection: trying again will not help


class AppriseTarget:
    """Notifies every URL of one ``apprise`` target; one attempt per URL per ``send``."""

    def __init__(self, name: str, spec: AppriseTargetSpec, context: TargetContext) -> None:
        quiet_apprise_logs()
        self.name = name
        self._context = context
        self._urls = [parse_apprise_url(url) for url in spec.apprise_urls()]
        self._redactor = Redactor(secret for url in self._urls for secret in (url.url, *url.secrets))
        asset = apprise.AppriseAsset(storage_mode="memory")
        self._notifiers: list[apprise.Apprise] = []
        for url in self._urls:
            notifier = apprise.Apprise(asset=asset)
            if not notifier.add(url.url):  # the spec's validator loaded it; this is not expected
                raise ValueError(f"apprise target {name!r}: Apprise refused {url.shown}")
            self._notifiers.append(notifier)
        self._done: OrderedDict[str, frozenset[int]] = OrderedDict()

    async def send(self, message: Message, *, idempotency_key: str) -> None:
        """Notify each URL that has not taken this delivery yet; raise when any did not."""
        done = self._done.get(idempotency_key, frozenset())
        todo = [index for index in range(len(self._urls)) if index not in done]
        outcomes = await asyncio.gather(*(self._notify(index, message) for index in todo))
        failed = [outcome for outcome in outcomes if outcome is not None]
        done = done | {index for index, outcome in zip(todo, outcomes, strict=True) if outcome is None}
        self._remember(idempotency_key, done if failed else None)
        if failed:
            raise self._error(failed, sent=len(done))

    async def _notify(self, index: int, message: Message) -> Failed | None:
        """One URL's attempt: None when its notifier succeeded, else what went wrong."""
        url, notifier = self._urls[index], self._notifiers[index]
        timeout_s = self._context.http.request_timeout_s
        with guarded(self._context.http.policy) as guard:
            try:
                async with asyncio.timeout(timeout_s + 1):  # Apprise's own limit comes first
                    result = await notifier.async_notify(
                        body=body(message),
                        title=title(message),
                        notify_type=notify_type(message),
                        body_format=apprise.NotifyFormat.TEXT,
                        timeout=timeout_s,
                    )
            except TimeoutError:
                return Failed(url.shown, f"no answer within {timeout_s:g}s", refused=False)
        if result:
            return None
        if guard.refusals:
            return Failed(url.shown, guard.refusals[0], refused=True)
        return Failed(url.shown, self._reason(result.logs() if hasattr(result, "logs") else ()), False)

    def _reason(self, entries: Iterable[object]) -> str:
        """Apprise's warnings and errors for one failed URL, on one line, redacted and cut."""
        lines = [
            str(getattr(entry, "message", entry))
            for entry in entries
            if str(getattr(entry, "level", "WARNING")) in ("WARNING", "ERROR", "CRITICAL")
        ]
        text = " ".join(" ".join(lines).split()) or "Apprise reported a failure"
        text = self._redactor.text(text)
        return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"

    def _remember(self, key: str, done: frozenset[int] | None) -> None:
        """Keep which URLs took delivery ``key`` (None: all did, forget it), the newest few only."""
        self._done.pop(key, None)
        if done:
            self._done[key] = done
            while len(self._done) > REMEMBERED_KEYS:
                self._done.popitem(last=False)

    def _error(self, failed: list[Failed], *, sent: int) -> DeliveryError:
        """A ``DeliveryError`` naming every failed URL: permanent only when every one was refused."""
        what = "; ".join(f"{f.shown}: {f.reason}" for f in failed)
        took = f" ({sent} of {len(self._urls)} URLs took it)" if sent else ""
        text = self._redactor.text(f"apprise target {self.name!r}: {what}{took}")
        if all(f.refused for f in failed):
            return DeliveryError(text)
        return TransientDeliveryError(text)

    async def close(self) -> None:
        """Nothing to release: Apprise's worker threads are shared and end with the process."""


def create(name: str, spec: TargetSpec, context: TargetContext) -> Target:
    """The ``apprise`` target called ``name``."""
    if not isinstance(spec, AppriseTargetSpec):
        raise TypeError(f"target {name!r}: expected an apprise spec, got {type(spec).__name__}")
    return AppriseTarget(name, spec, context)
