"""A storm's alerts that join an open group, written out without models (SPEC §19, issue 30).

An alert's fire normally becomes an envelope and a contract (validated models), goes through the
intake and is stored by ``accept_contract``: some 200 µs of CPU per alert, against 25 µs for a
bare handler that appends the alert to SQLite. Yet an alert that joins the group its key already
opened differs from any other such alert of its watcher in five values only: its callback id, the
instant, its dedupe key, its group's session key and its payload. So each watcher's two texts
(the envelope's wire text and the member's record) are made once by the full path's own functions
for a fire of marker values (``MemberTexts``) and cut at the markers; an alert's texts are the
pieces with its values between them, and ``GroupStore.join_members`` stores them.

``MemberTexts.of`` refuses (None) a watcher whose envelope depends on more than those values
(``payloadTemplate``, ``contextTemplate``, ``operatorGoalFile``) or whose texts do not cut as
expected; ``MemberTexts.member`` refuses an alert whose payload the envelope would cut
(``limits.maxPayloadChars``) or whose texts hold a secret the full path would mask. A refused
alert takes the full path, which does the same and more.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from pydantic_core import to_json

from sentinel_hooks.callbacks.intake.intake import CallbackIntake
from sentinel_hooks.clock import iso
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.config.watcher import AnyWatcher
from sentinel_hooks.core.alertmanager import alert_dedupe_basis
from sentinel_hooks.core.envelope import Envelope, default_dedupe_key, keeps_whole
from sentinel_hooks.core.grouping import GroupRule, by_values, group_key, group_session_key
from sentinel_hooks.store import codec
from sentinel_hooks.store.records import MemberJoin, to_epoch_ms
from sentinel_hooks.watchers.builder import Firing, build_envelope

log = logging.getLogger(__name__)

_AT: Final = datetime(2001, 2, 3, 4, 5, 6, 789000, tzinfo=UTC)
_CALLBACK: Final = "sentinel-written-member-callback-7d1f"
_PAYLOAD: Final = "\x01sentinel written member payload\x01"
_SLOTS: Final = ("callback", "at", "dedupe", "session", "payload")


@dataclass(frozen=True)
class _Cut:
    """A text cut at its slots: its pieces joined by ``%s`` (their own ``%`` doubled), one per
    slot of ``slots`` in order, so that one ``%`` formatting fills them all in."""

    template: str
    slots: tuple[str, ...]

    def fill(self, values: dict[str, str]) -> str:
        return self.template % tuple([values[slot] for slot in self.slots])


def _cut(text: str, markers: dict[str, str]) -> _Cut | None:
    """``text`` cut at every occurrence of each marker (its JSON text); None when a marker occurs
    inside another or where the text holds none of the slots it must."""
    found: list[tuple[int, int, str]] = []
    for slot, marker in markers.items():
        start = text.find(marker)
        while start != -1:
            found.append((start, start + len(marker), slot))
            start = text.find(marker, start + len(marker))
    found.sort()
    pieces, slots, at = [], [], 0
    for start, end, slot in found:
        if start < at:
            return None
        pieces.append(text[at:start])
        slots.append(slot)
        at = end
    pieces.append(text[at:])
    return _Cut("%s".join(piece.replace("%", "%%") for piece in pieces), tuple(slots))


@dataclass(frozen=True)
class _Facts:
    """What ``by_values`` reads of an envelope, for an alert that has none."""

    watcher: Any
    trigger: Any
    payload: Any
    context: dict[str, Any]


class MemberTexts:
    """One watcher's member texts, cut once (``of``); ``member`` fills them in for an alert."""

    def __init__(
        self,
        watcher: AnyWatcher,
        service: ServiceConfig,
        rule: GroupRule,
        sample: Envelope,
        envelope: _Cut,
        record: _Cut,
    ) -> None:
        self._watcher = watcher
        self._service = service
        self._rule = rule
        self._sample = sample
        self._envelope = envelope
        self._record = record
        self._at: tuple[datetime, str, int] | None = None  # the last instant, as text and ms: one per batch
        self._sessions: dict[str, str] = {}  # session key texts by group key (a storm has a few)

    @classmethod
    def of(
        cls, watcher: AnyWatcher, service: ServiceConfig, rule: GroupRule, intake: CallbackIntake
    ) -> MemberTexts | None:
        """The texts of ``watcher``'s members, cut from a marker fire's texts made as the full path
        makes them; None when its members cannot be written out this way. A shortcut that fails
        to make them is logged and left: the full path takes the watcher's alerts."""
        try:
            return cls._of(watcher, service, rule, intake)
        except Exception:
            log.warning(
                "watcher %s: its storm's joins cannot be written out; each takes the whole path",
                watcher.id,
                exc_info=True,
                extra={"watcherId": watcher.id},
            )
            return None

    @classmethod
    def _of(
        cls, watcher: AnyWatcher, service: ServiceConfig, rule: GroupRule, intake: CallbackIntake
    ) -> MemberTexts | None:
        fire = watcher.fire
        if fire.compiled_payload is not None or fire.compiled_context is not None:
            return None
        if fire.operator_goal_file is not None or fire.compiled_dedupe_key is not None:
            return None
        firing = Firing(kind="match", payload=_PAYLOAD, at=_AT)
        sample = build_envelope(watcher, service, firing, callback_id=_CALLBACK)
        record = intake.member_record(sample, rule, fire.session_group, now=_AT)
        markers = {
            "callback": _text(_CALLBACK),
            "at": _text(iso(_AT)),
            "dedupe": _text(record.dedupe_key),
            "session": _text(record.session_key),
            "payload": _text(_PAYLOAD),
        }
        envelope = _cut(sample.wire_text(), markers)
        doc = _cut(codec.dump_record(record), markers)
        if envelope is None or doc is None or sample.context:
            return None
        if set(envelope.slots) != {"callback", "at", "dedupe", "payload"}:
            return None
        if set(doc.slots) != {"callback", "at", "dedupe", "session"}:
            return None
        return cls(watcher, service, rule, sample, envelope, doc)

    def key(self, alert: dict[str, Any]) -> str:
        """The group key of ``alert``'s fire."""
        facts = _Facts(self._sample.watcher, self._sample.trigger, alert, {})
        return group_key(self._rule.name, by_values(self._rule, facts))

    def member(
        self, alert: dict[str, Any], callback_id: str, key: str, at: datetime, redactor: Redactor
    ) -> MemberJoin | None:
        """``alert``'s fire under ``callback_id`` at ``at`` (UTC, whole milliseconds) as a member of
        the group of ``key``; None when the full path would write it otherwise (its payload cut,
        a secret in it masked)."""
        watcher = self._watcher
        basis = alert_dedupe_basis(alert)
        if basis is alert:  # not an alert's identity: the full path keeps a dedupe key
            return None
        payload = to_json(alert).decode()
        if not keeps_whole(alert, payload, self._service.limits.max_payload_chars):
            return None
        if self._at is None or self._at[0] != at:
            self._at = at, _text(iso(at)), to_epoch_ms(at)
        if key not in self._sessions:
            if len(self._sessions) >= 1024:
                self._sessions.clear()
            self._sessions[key] = _text(group_session_key(self._service.hook_session_prefix, key))
        values = {
            "callback": _text(callback_id),
            "at": self._at[1],
            "dedupe": _text(default_dedupe_key(watcher.id, watcher.event_name, basis)),
            "session": self._sessions[key],
            "payload": payload,
        }
        envelope = self._envelope.fill(values)
        if redactor.secrets and redactor.found_in(envelope):
            return None
        return MemberJoin(
            callback_id=callback_id,
            watcher_id=watcher.id,
            created_ms=self._at[2],
            doc=self._record.fill(values),
            envelope=envelope,
        )


def _text(value: str) -> str:
    """``value`` as JSON text, as the records' serialiser writes it."""
    return to_json(value).decode()
