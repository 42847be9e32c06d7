"""Record models: their JSON form is the API's shape (SPEC §9), instants UTC to the millisecond."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from sentinel_hooks.store import Delivery, InboxHistoryEntry, Page
from tests.contract import stores

make = stores.make


def test_contract_dumps_to_the_api_shape(make) -> None:
    """A contract's JSON has the camelCase keys of SPEC §9 and ISO times with ms and Z, and
    ``silencedBy`` (the silence or maintenance window of a ``silenced`` one, SPEC §14) and
    ``followUps`` (the agent's notifies after the page, SPEC §6.4), ``traceId`` and
    ``traceParent`` (the fire's trace, SPEC §22; null without an OTLP endpoint), ``groupId`` and
    ``group`` (grouping, SPEC §19: null for a fire outside any group)."""
    dumped = make.contract("cb-1", created=1.5, deadline=31.5).model_dump(mode="json", by_alias=True)
    assert {
        "callbackId": "cb-1",
        "watcherId": "eth-price",
        "dedupeKey": "dk-cb-1",
        "sessionKey": "sentinel:hooks:watcher:eth-price",
        "state": "pending",
        "trigger": {"kind": "match", "priority": "high", "matchedAt": "2026-01-01T00:00:01.500Z"},
        "createdAt": "2026-01-01T00:00:01.500Z",
        "deadline": "2026-01-01T00:00:31.500Z",
        "settledAt": None,
        "targets": ["oncall"],
        "silencedBy": None,
        "followUps": 0,
        "traceId": None,
        "traceParent": None,
        "groupId": None,
        "group": None,
    } == dumped


def test_inbox_item_dumps_to_the_api_shape(make) -> None:
    """An inbox item's JSON has the keys of SPEC §8."""
    dumped = make.inbox_item("i-1").model_dump(mode="json", by_alias=True)
    assert [
        "id",
        "kind",
        "status",
        "severity",
        "reason",
        "watcherId",
        "callbackId",
        "sessionKey",
        "createdAt",
        "updatedAt",
        "actor",
        "note",
        "detail",
    ] == list(dumped)


def test_history_entry_dumps_from_and_to(make) -> None:
    """A history entry's JSON is {at, actor, from, to, note}."""
    entry = InboxHistoryEntry(at=make.at(0), actor="ana", from_status="open", to_status="acked", note=None)
    assert {
        "at": "2026-01-01T00:00:00.000Z",
        "actor": "ana",
        "from": "open",
        "to": "acked",
        "note": None,
    } == entry.model_dump(mode="json", by_alias=True)


def test_page_dumps_items_and_next_cursor() -> None:
    """A page's JSON is {items, nextCursor}."""
    assert {"items": [1], "nextCursor": "abc"} == Page[int](items=[1], next_cursor="abc").model_dump(
        mode="json", by_alias=True
    )


def test_records_parse_their_own_json(make) -> None:
    """A contract read back from its API JSON equals the original."""
    original = make.contract("cb-1")
    assert original == type(original).model_validate_json(original.model_dump_json(by_alias=True))


def test_instants_are_truncated_to_milliseconds(make) -> None:
    """Microseconds below a millisecond are dropped on construction."""
    observed = make.at(0) + timedelta(microseconds=1_999)
    entry = InboxHistoryEntry(at=observed, actor="a", from_status=None, to_status="open")
    assert make.at(0.001) == entry.at


def test_instants_are_converted_to_utc() -> None:
    """An aware instant in another zone is stored as the same instant in UTC."""
    plus_two = datetime(2026, 1, 1, 2, 0, tzinfo=timezone(timedelta(hours=2)))
    entry = InboxHistoryEntry(at=plus_two, actor="a", from_status=None, to_status="open")
    assert (datetime(2026, 1, 1, tzinfo=UTC), UTC) == (entry.at, entry.at.tzinfo)


def test_naive_instants_are_refused() -> None:
    """A datetime without a timezone is a validation error."""
    with pytest.raises(ValidationError, match="timezone"):
        InboxHistoryEntry(at=datetime(2026, 1, 1), actor="a", from_status=None, to_status="open")


def test_delivery_key_must_match_its_parts(make) -> None:
    """A delivery whose key is not callbackId:target:kind is refused."""
    fields = make.delivery("a").model_dump()
    with pytest.raises(ValidationError, match="must be 'a:oncall:fallback'"):
        Delivery.model_validate({**fields, "key": "a:oncall:notify"})


def test_records_refuse_unknown_keys(make) -> None:
    """Unknown keys are rejected rather than silently dropped."""
    fields = make.contract("a").model_dump(by_alias=True)
    with pytest.raises(ValidationError, match="extra"):
        type(make.contract("a")).model_validate({**fields, "colour": "red"})


def test_new_delivery_equals_a_validated_one() -> None:
    """``Delivery.new`` (built without re-validation) holds what validation would make of it."""
    plus_two = datetime(2026, 1, 1, 2, 0, 0, 123_456, tzinfo=timezone(timedelta(hours=2)))
    message = {"text": "x", "extra": {}}
    made = Delivery.new("cb-1", "oncall", "fallback", message, at=plus_two)
    message["text"] = "changed later"
    validated = Delivery.model_validate_json(made.model_dump_json(by_alias=True))
    expected_at = datetime(2026, 1, 1, 0, 0, 0, 123_000, tzinfo=UTC)
    assert (validated, "cb-1:oncall:fallback", expected_at, UTC) == (
        made,
        made.key,
        made.created_at,
        made.created_at.tzinfo,
    )
    assert {"text": "x", "extra": {}} == made.message


def test_new_delivery_due_later_equals_a_validated_one() -> None:
    """``Delivery.new(due=...)`` (a held delivery) normalises its due time as validation would."""
    at = datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC)
    due = datetime(2026, 1, 1, 2, 0, 30, 654_321, tzinfo=timezone(timedelta(hours=2)))
    made = Delivery.new("cb-1", "oncall", "notify", {"text": "x"}, at=at, due=due)
    validated = Delivery.model_validate_json(made.model_dump_json(by_alias=True))
    expected_due = datetime(2026, 1, 1, 0, 0, 30, 654_000, tzinfo=UTC)
    assert (validated, expected_due, at) == (made, made.next_attempt_at, made.created_at)
