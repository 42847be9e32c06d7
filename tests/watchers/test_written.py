"""A storm's member written out (watchers/written.py) is what the full path would store for it:
for any alert, the envelope's wire text and the member's record parse to the same JSON as the
texts ``build_envelope`` and the intake make; and an alert or watcher the texts could not
speak for is refused, so it takes the full path."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import to_json

from sentinel_hooks.callbacks.intake.intake import CallbackIntake, LoggingSink
from sentinel_hooks.canonical import canonical_json
from sentinel_hooks.clock import FakeClock
from sentinel_hooks.config.grouping import group_rule
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.config.watcher import WATCHER_ADAPTER, AnyWatcher
from sentinel_hooks.core.alertmanager import alert_callback_id
from sentinel_hooks.core.envelope import keeps_whole, truncate_payload
from sentinel_hooks.core.grouping import GroupRule
from sentinel_hooks.store import codec
from sentinel_hooks.store.sqlite import SqliteStore
from sentinel_hooks.watchers.builder import Firing, build_envelope
from sentinel_hooks.watchers.written import MemberTexts

NOW = datetime(2026, 3, 1, 10, 0, 5, 123000, tzinfo=UTC)
SERVICE = ServiceConfig()


def watcher(**fire: Any) -> AnyWatcher:
    return WATCHER_ADAPTER.validate_python(
        {
            "id": "am",
            "strategy": "webhook",
            "format": "alertmanager",
            "conditions": [{"path": "labels.severity", "op": "eq", "value": "critical"}],
            "deliveryTargets": ["console"],
            "tags": ["prod", "db"],
            "fire": {
                "eventName": "alert",
                "priority": "high",
                "operatorGoal": "Find why.",
                "group": {"by": ["payload.labels.alertname", "watcher.id"], "waitMs": 500},
                **fire,
            },
        }
    )


def rule_of(spec: AnyWatcher) -> GroupRule:
    rule = group_rule(spec.id, SERVICE.grouping, spec.fire.group)
    assert rule is not None
    return rule


def intake(tmp_path: Path) -> CallbackIntake:
    store = SqliteStore(tmp_path / "unused.db")  # the texts are made without the store
    return CallbackIntake(store=store, clock=FakeClock(NOW), service=SERVICE, sink=LoggingSink())


WATCHER = watcher()
IDENTITY = {"fingerprint": "fp-1", "startsAt": "2026-03-01T10:00:00Z"}
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
VALUE = st.one_of(
    TEXT, st.integers(-(2**40), 2**40), st.floats(allow_nan=False, allow_infinity=False), st.booleans()
)
ALERTS = st.fixed_dictionaries(
    {
        "status": st.just("firing"),
        "labels": st.dictionaries(TEXT, TEXT, max_size=4).map(lambda d: {**d, "alertname": d.get("", "X")}),
        "annotations": st.dictionaries(TEXT, st.one_of(VALUE, st.lists(VALUE, max_size=3)), max_size=3),
        "startsAt": st.sampled_from(["2026-03-01T10:00:00Z", "2026-03-01T10:00:00.5+01:00"]),
        "endsAt": st.just("0001-01-01T00:00:00Z"),
        "fingerprint": TEXT,
    }
)


def full_texts(tmp_path: Path, alert: dict[str, Any], callback_id: str) -> tuple[Any, Any]:
    """The envelope and member record the full path makes for ``alert``'s fire, as JSON."""
    firing = Firing(kind="match", payload=alert, at=NOW)
    envelope = build_envelope(WATCHER, SERVICE, firing, redactor=Redactor(), callback_id=callback_id)
    record = intake(tmp_path).member_record(envelope, rule_of(WATCHER), None, now=NOW)
    return json.loads(envelope.wire_text()), json.loads(codec.dump_record(record))


@settings(max_examples=150, deadline=None)
@given(alert=ALERTS)
def test_a_member_written_out_is_the_full_path_s(
    tmp_path_factory: pytest.TempPathFactory, alert: dict[str, Any]
) -> None:
    tmp_path = tmp_path_factory.mktemp("written")
    texts = MemberTexts.of(WATCHER, SERVICE, rule_of(WATCHER), intake(tmp_path))
    assert texts is not None
    callback_id = alert_callback_id("am", alert)
    key = texts.key(alert)
    member = texts.member(alert, callback_id, key, NOW, Redactor())
    assert member is not None
    envelope, record = full_texts(tmp_path, alert, callback_id)
    assert envelope == json.loads(member.envelope)
    assert record == json.loads(member.doc)
    assert "g-1" == json.loads(member.doc_in("g-1"))["groupId"]
    assert (callback_id, "am", 1772359205123) == (member.callback_id, member.watcher_id, member.created_ms)


def test_a_payload_the_envelope_would_cut_takes_the_full_path(tmp_path: Path) -> None:
    texts = MemberTexts.of(WATCHER, SERVICE, rule_of(WATCHER), intake(tmp_path))
    assert texts is not None
    small = {**IDENTITY, "labels": {"alertname": "X"}, "annotations": {"log": "x"}}
    big = {**small, "annotations": {"log": "x" * SERVICE.limits.max_payload_chars}}
    assert texts.member(small, "cb-1", texts.key(small), NOW, Redactor()) is not None
    assert texts.member(big, "cb-1", texts.key(big), NOW, Redactor()) is None


def test_a_payload_holding_a_secret_takes_the_full_path(tmp_path: Path) -> None:
    texts = MemberTexts.of(WATCHER, SERVICE, rule_of(WATCHER), intake(tmp_path))
    assert texts is not None
    alert = {**IDENTITY, "labels": {"alertname": "X", "token": "hunter2-very-secret"}}
    assert texts.member(alert, "cb-1", texts.key(alert), NOW, Redactor(["hunter2-very-secret"])) is None
    assert texts.member(alert, "cb-1", texts.key(alert), NOW, Redactor(["another-secret-1"])) is not None


def test_a_payload_without_an_alert_s_identity_takes_the_full_path(tmp_path: Path) -> None:
    """Without a fingerprint and startsAt the full path keeps a dedupe key for the fire."""
    texts = MemberTexts.of(WATCHER, SERVICE, rule_of(WATCHER), intake(tmp_path))
    assert texts is not None
    alert = {"labels": {"alertname": "X"}, "startsAt": "2026-03-01T10:00:00Z"}
    assert texts.member(alert, "cb-1", texts.key(alert), NOW, Redactor()) is None


@pytest.mark.parametrize(
    "fire",
    [
        {"payloadTemplate": {"host": "${payload.labels.instance}"}},
        {"contextTemplate": {"host": "${payload.labels.instance}"}},
        {"operatorGoalFile": "goal.md"},
        {"dedupeKeyTemplate": "${payload.labels.alertname}"},
    ],
)
def test_a_watcher_whose_envelope_depends_on_more_takes_the_full_path(
    tmp_path: Path, fire: dict[str, Any]
) -> None:
    spec = watcher(**fire)
    assert MemberTexts.of(spec, SERVICE, rule_of(spec), intake(tmp_path)) is None


STRING_ALERTS = st.dictionaries(TEXT, st.one_of(TEXT, st.dictionaries(TEXT, TEXT, max_size=4)), max_size=6)


@settings(max_examples=300, deadline=None)
@given(alert=st.one_of(STRING_ALERTS, ALERTS), slack=st.integers(-3, 3))
def test_the_payload_is_kept_whole_exactly_when_the_envelope_keeps_it(
    alert: dict[str, Any], slack: int
) -> None:
    """Measured on the text already made (an alert of text and maps of text) or as the envelope
    measures it, at limits around the payload's own length."""
    text = to_json(alert).decode()
    limit = max(1, len(canonical_json(alert)) + slack)
    assert (truncate_payload(alert, limit) is alert) == keeps_whole(alert, text, limit)


def test_numbers_are_measured_as_the_envelope_measures_them() -> None:
    alert = {"labels": {"alertname": "X"}, "values": {"B": 1e20}}
    text = to_json(alert).decode()
    assert len(text) < len(canonical_json(alert))
    assert not keeps_whole(alert, text, len(text))


def test_each_member_has_its_own_instant_and_group(tmp_path: Path) -> None:
    """The texts kept between members (the instant's, the group's session key) follow each one."""
    texts = MemberTexts.of(WATCHER, SERVICE, rule_of(WATCHER), intake(tmp_path))
    assert texts is not None
    later = NOW.replace(second=9)
    made = []
    for at, name in [(NOW, "A"), (NOW, "B"), (later, "A"), (later, "B")]:
        alert = {**IDENTITY, "labels": {"alertname": name}}
        member = texts.member(alert, f"cb-{name}", texts.key(alert), at, Redactor())
        assert member is not None
        made.append(json.loads(member.doc))
    first, second = "2026-03-01T10:00:05.123Z", "2026-03-01T10:00:09.123Z"
    assert [m["createdAt"] for m in made] == [first, first, second, second]
    assert [m["sessionKey"].endswith('["am",["A","am"]]') for m in made] == [True, False, True, False]


def test_texts_that_fail_to_be_made_leave_the_alerts_to_the_full_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A fault in the shortcut (injected: the marker fire's envelope raises) is logged once per
    watcher and answered None, so the intake takes each alert the whole way instead of failing."""

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("injected")

    monkeypatch.setattr("sentinel_hooks.watchers.written.build_envelope", broken)
    assert MemberTexts.of(WATCHER, SERVICE, rule_of(WATCHER), intake(tmp_path)) is None
    assert "watcher am: its storm's joins cannot be written out" in caplog.text
