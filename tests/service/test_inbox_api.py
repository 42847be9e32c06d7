"""Inbox and approval routes (SPEC §8, §9) against an in-process service."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from sentinel_hooks.clock import iso
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.service import Service
from sentinel_hooks.store import Contract, InboxItem, Trigger
from tests.service.conftest import Starter
from tests.service.test_api import call


@pytest.fixture
async def service(start_service: Starter) -> Service:
    """A running service with no watchers."""
    return await start_service(watchers={})


async def escalation(service: Service, **extra: Any) -> InboxItem:
    return await service.inbox.create("escalation", severity="warning", reason="price fell", **extra)


async def approval(service: Service) -> InboxItem:
    return await service.inbox.create("approval", severity="info", reason="run restart-api", actor="agent")


def shown(item: InboxItem) -> dict[str, Any]:
    """The item as the API shows it (no escalation chain: this service has no policy)."""
    return {**item.model_dump(mode="json", by_alias=True), "escalation": None}


async def post(
    service: Service, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    sent = {"Content-Type": "application/json", **(headers or {})}
    return await call(service, "POST", path, body=body, headers=sent)


async def test_list_returns_items_newest_first_in_the_api_shape(service: Service) -> None:
    """GET /api/v1/inbox lists every item, camelCase with ISO times, and no next cursor."""
    first = await escalation(service, watcher_id="eth", detail={"p": 1})
    second = await approval(service)
    status, body = await call(service, "GET", "/api/v1/inbox")
    expected = [shown(second), shown(first)]
    assert (200, expected, None) == (status, body["items"], body["nextCursor"])


async def test_list_item_has_every_spec_field(service: Service) -> None:
    """An item carries the keys SPEC §8 names."""
    await escalation(service)
    _, body = await call(service, "GET", "/api/v1/inbox")
    expected = {
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
        "escalation",  # where its escalation chain is (SPEC §15)
    }
    assert expected == set(body["items"][0])


async def test_list_filters_by_status_and_kind(service: Service) -> None:
    """?status=open&kind=approval returns only open approvals."""
    await escalation(service)
    waiting = await approval(service)
    decided = await approval(service)
    await service.inbox.deny(decided.id, actor="ana")
    _, body = await call(service, "GET", "/api/v1/inbox?kind=approval&status=open")
    assert [waiting.id] == [i["id"] for i in body["items"]]


async def test_list_paginates_with_next_cursor(service: Service) -> None:
    """limit and cursor page through every item once."""
    made = {(await escalation(service)).id for _ in range(3)}
    _, first = await call(service, "GET", "/api/v1/inbox?limit=2")
    _, second = await call(service, "GET", f"/api/v1/inbox?limit=2&cursor={first['nextCursor']}")
    seen = [i["id"] for i in first["items"] + second["items"]]
    assert (made, 3, None) == (set(seen), len(seen), second["nextCursor"])


async def test_list_with_an_unknown_status_is_400_listing_the_allowed(service: Service) -> None:
    """An invalid status value is 400 with the allowed values."""
    status, body = await call(service, "GET", "/api/v1/inbox?status=closed")
    allowed = ["open", "acked", "resolved", "approved", "denied", "expired"]
    assert (400, "invalid_status", allowed) == (
        status,
        body["error"]["code"],
        body["error"]["details"]["allowed"],
    )


async def test_list_with_an_unknown_kind_is_400(service: Service) -> None:
    """An invalid kind value is 400 naming the allowed kinds."""
    status, body = await call(service, "GET", "/api/v1/inbox?kind=alert")
    expected = "kind 'alert' is not one of escalation, approval, delivery_failure"
    assert (400, expected) == (status, body["error"]["message"])


@pytest.mark.parametrize("limit", ["0", "501", "ten"])
async def test_list_with_a_bad_limit_is_400(service: Service, limit: str) -> None:
    """limit must be an integer from 1 to 500."""
    status, body = await call(service, "GET", f"/api/v1/inbox?limit={limit}")
    assert (400, "invalid_limit") == (status, body["error"]["code"])


async def test_list_with_a_foreign_cursor_is_400(service: Service) -> None:
    """A cursor the store did not issue is 400."""
    status, body = await call(service, "GET", "/api/v1/inbox?cursor=!!bogus")
    assert (400, "invalid_cursor") == (status, body["error"]["code"])


async def test_show_returns_the_item_and_its_history(service: Service) -> None:
    """GET /api/v1/inbox/{id} → {item, history: [{at, actor, from, to, note}]}."""
    item = await escalation(service)
    acked = await service.inbox.ack(item.id, actor="ana", note="on it")
    status, body = await call(service, "GET", f"/api/v1/inbox/{item.id}")
    created_at = item.model_dump(mode="json", by_alias=True)["createdAt"]
    acked_at = acked.model_dump(mode="json", by_alias=True)["updatedAt"]
    expected = {
        "item": shown(acked),
        "history": [
            {"at": created_at, "actor": "sentinel", "from": None, "to": "open", "note": None},
            {"at": acked_at, "actor": "ana", "from": "open", "to": "acked", "note": "on it"},
        ],
    }
    assert (200, expected) == (status, body)


async def test_show_of_an_unknown_id_is_404(service: Service) -> None:
    """An unknown id is 404 in the JSON error shape."""
    status, body = await call(service, "GET", "/api/v1/inbox/nope")
    assert (404, "not_found") == (status, body["error"]["code"])


async def test_ack_with_a_note_answers_the_acked_item(service: Service) -> None:
    """POST ack {note} → 200 {item} with status acked and the note."""
    item = await escalation(service)
    status, body = await post(service, f"/api/v1/inbox/{item.id}/ack", {"note": "looking"})
    assert (200, "acked", "looking") == (status, body["item"]["status"], body["item"]["note"])


async def test_ack_records_the_actor_header(service: Service) -> None:
    """X-Sentinel-Actor is stored on the item and in its history."""
    item = await escalation(service)
    await post(service, f"/api/v1/inbox/{item.id}/ack", {}, {"X-Sentinel-Actor": "ana"})
    stored, history = await service.inbox.get(item.id)
    assert ("ana", "ana") == (stored.actor, history[-1].actor)


async def test_actor_defaults_to_api(service: Service) -> None:
    """Without the header the actor is api."""
    item = await escalation(service)
    _, body = await post(service, f"/api/v1/inbox/{item.id}/resolve", {})
    assert "api" == body["item"]["actor"]


async def test_a_post_without_a_body_is_accepted(service: Service) -> None:
    """A JSON-labelled POST with no body acts like {}."""
    item = await escalation(service)
    status, body = await post(service, f"/api/v1/inbox/{item.id}/ack")
    assert (200, "acked") == (status, body["item"]["status"])


async def test_resolve_after_ack_is_200(service: Service) -> None:
    """open → acked → resolved through the API."""
    item = await escalation(service)
    await post(service, f"/api/v1/inbox/{item.id}/ack", {})
    status, body = await post(service, f"/api/v1/inbox/{item.id}/resolve", {"note": "fixed"})
    assert (200, "resolved") == (status, body["item"]["status"])


async def test_resolving_twice_is_409_naming_the_status(service: Service) -> None:
    """A second resolve is 409 explaining the current state."""
    item = await escalation(service)
    await post(service, f"/api/v1/inbox/{item.id}/resolve", {})
    status, body = await post(service, f"/api/v1/inbox/{item.id}/resolve", {})
    expected = f"item {item.id} is resolved; only open or acked items can be resolved"
    assert (409, "conflict", expected) == (status, body["error"]["code"], body["error"]["message"])


async def test_ack_of_an_unknown_id_is_404(service: Service) -> None:
    """ack on an unknown id is 404."""
    status, _ = await post(service, "/api/v1/inbox/nope/ack", {})
    assert 404 == status


async def test_approve_answers_the_approved_item(service: Service) -> None:
    """POST approvals/{id}/approve → 200 {item} approved."""
    item = await approval(service)
    status, body = await post(service, f"/api/v1/approvals/{item.id}/approve", {"note": "go"})
    assert (200, "approved", "go") == (status, body["item"]["status"], body["item"]["note"])


async def test_deny_answers_the_denied_item(service: Service) -> None:
    """POST approvals/{id}/deny → 200 {item} denied."""
    item = await approval(service)
    status, body = await post(service, f"/api/v1/approvals/{item.id}/deny", {})
    assert (200, "denied") == (status, body["item"]["status"])


async def test_approve_after_deny_is_409(service: Service) -> None:
    """A decided approval cannot be approved."""
    item = await approval(service)
    await post(service, f"/api/v1/approvals/{item.id}/deny", {})
    status, _ = await post(service, f"/api/v1/approvals/{item.id}/approve", {})
    assert 409 == status


async def test_approving_an_escalation_is_409(service: Service) -> None:
    """approve on a non-approval item is 409."""
    item = await escalation(service)
    status, body = await post(service, f"/api/v1/approvals/{item.id}/approve", {})
    assert (409, True) == (status, "not an approval" in body["error"]["message"])


async def test_acking_an_approval_is_409(service: Service) -> None:
    """ack on an approval is 409: approvals are approved or denied."""
    item = await approval(service)
    status, _ = await post(service, f"/api/v1/inbox/{item.id}/ack", {})
    assert 409 == status


async def test_deny_of_an_unknown_id_is_404(service: Service) -> None:
    """deny on an unknown id is 404."""
    status, _ = await post(service, "/api/v1/approvals/nope/deny", {})
    assert 404 == status


async def paused_callback(service: Service) -> str:
    """A callback waiting for an approval, due in an hour (no session is running it)."""
    now = service.clock.now()
    envelope = Envelope.model_validate(
        {"watcher": {"id": "w", "eventName": "disk_full"}, "trigger": {"matchedAt": iso(now)}}
    )
    contract = Contract(
        callback_id=envelope.callback_id,
        watcher_id="w",
        dedupe_key=envelope.callback_id,
        session_key="sentinel:hooks:watcher:w",
        state="pending",
        trigger=Trigger(kind="match", priority="normal", matched_at=now),
        created_at=now,
        deadline=now + timedelta(hours=1),
        targets=[],
    )
    assert await service.store.accept_contract(contract, envelope) is not None
    await service.relay.approval_requested(contract.callback_id)
    return contract.callback_id


async def test_an_api_approval_reaches_the_paused_callback(service: Service) -> None:
    """An approval decided through the API reaches the inbox's on_decision hook: the hook
    sessions give the callback it paused its deadline back."""
    callback_id = await paused_callback(service)
    item = await service.inbox.create(
        "approval", severity="info", reason="run restart-api", actor="agent", callback_id=callback_id
    )
    await post(service, f"/api/v1/approvals/{item.id}/approve", {})
    contract = await service.store.get_contract(callback_id)
    assert contract is not None
    assert "pending" == contract.state


async def test_a_note_over_2000_characters_is_400(service: Service) -> None:
    """Notes are limited to 2000 characters; nothing changes."""
    item = await escalation(service)
    status, body = await post(service, f"/api/v1/inbox/{item.id}/ack", {"note": "x" * 2001})
    stored, _ = await service.inbox.get(item.id)
    assert (400, "invalid_note", "open") == (status, body["error"]["code"], stored.status)


async def test_a_note_of_2000_characters_is_accepted(service: Service) -> None:
    """A 2000-character note is within the limit."""
    item = await escalation(service)
    status, _ = await post(service, f"/api/v1/inbox/{item.id}/ack", {"note": "x" * 2000})
    assert 200 == status


@pytest.mark.parametrize("body", [{"note": 5}, {"notes": "x"}, ["note"]])
async def test_a_malformed_body_is_400(service: Service, body: Any) -> None:
    """The body must be {} or {"note": string}."""
    item = await escalation(service)
    status, _ = await post(service, f"/api/v1/inbox/{item.id}/ack", body)
    assert 400 == status


async def test_a_non_json_post_is_415(service: Service) -> None:
    """A form-encoded POST is refused by the request hygiene."""
    item = await escalation(service)
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    status, _ = await call(service, "POST", f"/api/v1/inbox/{item.id}/ack", raw=b"note=x", headers=headers)
    assert 415 == status


async def test_an_actor_over_200_characters_is_400(service: Service) -> None:
    """An overlong X-Sentinel-Actor is refused."""
    item = await escalation(service)
    status, body = await post(service, f"/api/v1/inbox/{item.id}/ack", {}, {"X-Sentinel-Actor": "a" * 201})
    assert (400, "invalid_actor") == (status, body["error"]["code"])
