"""The plug-in point for delivery targets: a Protocol, the message it carries, and a registry.

A target sends one message once and raises ``DeliveryError`` when it could not
(``TransientDeliveryError``, with an optional ``retry_after_s``, when trying again may help);
``delivery.dispatch`` owns retries, backoff and dead letters. Every target that speaks HTTP
goes through the service's one ``SafeHttp`` client (allowlist, private-address rules, no
redirects).

A new target type is a module exposing ``create(name, spec, context)`` (a ``TargetFactory``),
an entry in ``MODULES`` and a ``type`` in ``config/targets.py``; tests/contract/test_targets.py
then runs the contract against it. ``RecordingTarget`` (``delivery/targets/recording.py``) is the fake
that ships for tests.
"""

from __future__ import annotations

import copy
import importlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from sentinel_hooks.clock import Clock
from sentinel_hooks.errors import SentinelError, TransientError
from sentinel_hooks.store.base import CheckpointStore, PaceStore

if TYPE_CHECKING:
    from sentinel_hooks.config.targets import TargetSpec
    from sentinel_hooks.net.client import SafeHttp


class TargetStore(CheckpointStore, PaceStore, Protocol):
    """What targets keep in the store: checkpoints (Slack threads, resolved PagerDuty alerts) and
    pacing windows (PagerDuty's events per minute)."""


DETAILS_CHARS = 2000  # the most of an observed payload a message carries (``details_payload``)


class DeliveryError(SentinelError):
    """A send failed, and will fail alike (a 4xx, a refused host, a message that is not JSON):
    the delivery becomes a dead letter at once."""


class TransientDeliveryError(DeliveryError, TransientError):
    """A send failed in a way that may pass (network failure, 5xx, 408, 429, a busy disk): the
    outbox tries again with backoff, waiting at least ``retry_after_s`` when the receiver asked."""

    def __init__(self, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class DeferredDelivery(SentinelError):
    """The target may not send yet (a receiver's pace, SPEC §16): the outbox keeps the delivery
    pending until ``until`` without counting an attempt, so the wait lives in the store."""

    def __init__(self, message: str, *, until: datetime) -> None:
        super().__init__(message)
        self.until = until


class CancelledDelivery(SentinelError):
    """The message must no longer be sent (a PagerDuty trigger whose alert was resolved
    meanwhile): the delivery ends ``cancelled`` with this reason, never ``delivered``."""


def delivery_error(message: str, *, like: BaseException) -> DeliveryError:
    """The ``DeliveryError`` reporting ``like`` as ``message``: transient (keeping its Retry-After
    hint) when ``like`` is."""
    if isinstance(like, TransientError):
        return TransientDeliveryError(message, retry_after_s=like.retry_after_s)
    return DeliveryError(message)


@dataclass(frozen=True)
class Message:
    """What reaches people: one line (or a few) of text about one callback.

    ``kind`` is the delivery kind (notify, fallback, fanout, resolved, escalation);
    ``envelope`` is included only when the message is meant to carry it (debug fan-out,
    webhook receivers that asked for it). ``payload`` is the observed payload of the fire a
    notify or fallback is about, cut by ``details_payload``, for targets that show it as
    structured data (PagerDuty's ``custom_details``); the outbox stores it redacted. ``page``
    marks the message that pages people about the callback (SPEC §6.4: the fallback, or a notify
    handed over while the contract was open); every other message is about a page already sent
    or still to come (``in_reply_to``); ``follow_up`` marks an agent notify after the page.
    """

    callback_id: str
    watcher_id: str
    event_name: str
    priority: str
    kind: str
    text: str
    envelope: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    payload: Any = None
    page: bool = False
    follow_up: bool = False  # an agent notify after the callback's page (SPEC §6.4)

    @property
    def in_reply_to(self) -> str | None:
        """The callback whose page this message is about: its id on every message but the page."""
        return None if self.page or not self.callback_id else self.callback_id

    def to_json(self) -> dict[str, Any]:
        """The message as a JSON object (nested dicts are copied, as ``dataclasses.asdict`` would,
        field by field because this runs once per delivery enqueued)."""
        return {
            "callback_id": self.callback_id,
            "watcher_id": self.watcher_id,
            "event_name": self.event_name,
            "priority": self.priority,
            "kind": self.kind,
            "text": self.text,
            "envelope": None if self.envelope is None else copy.deepcopy(self.envelope),
            "extra": copy.deepcopy(self.extra) if self.extra else {},
            "payload": copy.deepcopy(self.payload) if isinstance(self.payload, dict | list) else self.payload,
            "page": self.page,
            "follow_up": self.follow_up,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Message:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def details_payload(payload: Any) -> Any:
    """``payload`` for ``Message.payload``: as it is when its compact JSON has at most
    ``DETAILS_CHARS`` characters, else ``{"truncated": <that JSON cut there>}`` (so a message
    stays small whatever was observed)."""
    if payload is None:
        return None
    try:
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return None
    if len(text) <= DETAILS_CHARS:
        return payload
    return {"truncated": text[:DETAILS_CHARS]}


class Target(Protocol):
    """A place messages go (Slack, a webhook, the console, a file).

    A target that cannot thread may leave follow-ups out (``takes_follow_ups``): they are then
    never handed to it.

    ``send`` makes one attempt and returns when the target accepted the message; it raises
    ``DeliveryError`` otherwise (``TransientDeliveryError`` for network errors, 5xx, 408 and 429). The same
    ``idempotency_key`` is passed on every attempt of one delivery, so receivers can drop
    duplicates. It must not retry by itself.
    """

    name: str

    async def send(self, message: Message, *, idempotency_key: str) -> None: ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class TargetContext:
    """What targets may use."""

    http: SafeHttp
    clock: Clock
    base_dir: Path
    console: TextIO | None = None  # None: the service's standard output
    store: TargetStore | None = (
        None  # where a target keeps what must outlive a process (Slack threads); None: nowhere
    )
    slack_buttons: bool = False  # bot-token Slack pages carry buttons (``slack.signingSecret``, SPEC §21)


class TargetFactory(Protocol):
    def __call__(self, name: str, spec: TargetSpec, context: TargetContext) -> Target: ...


MODULES: dict[str, str] = {
    "slack": "sentinel_hooks.delivery.targets.slack",
    "webhook": "sentinel_hooks.delivery.targets.webhook",
    "console": "sentinel_hooks.delivery.targets.console",
    "file": "sentinel_hooks.delivery.targets.file",
    "pagerduty": "sentinel_hooks.delivery.targets.pagerduty",
    "apprise": "sentinel_hooks.delivery.targets.apprise",
}


def takes_follow_ups(target: Target) -> bool:
    """Whether ``target`` gets follow-ups (SPEC §6.4): yes unless it says otherwise with a
    ``follow_ups`` attribute (Apprise and incoming-webhook Slack, after their ``followUps`` key)."""
    return bool(getattr(target, "follow_ups", True))


def create_target(name: str, spec: TargetSpec, context: TargetContext) -> Target:
    """The target for one entry of ``targets:`` (each module exposes ``create``)."""
    factory: TargetFactory = importlib.import_module(MODULES[spec.type]).create
    return factory(name, spec, context)


def create_targets(specs: Mapping[str, TargetSpec], context: TargetContext) -> dict[str, Target]:
    """Every configured target, by name."""
    return {name: create_target(name, spec, context) for name, spec in specs.items()}
