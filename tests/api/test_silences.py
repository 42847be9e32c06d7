"""Silences through the HTTP API (SPEC.md §14): create, list, show, expire; what they mute (manual
fires, ingest, external envelopes); the watcher's silencedBy; ack with silenceForMs; status;
bad input; every answer true to the OpenAPI document."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sentinel_hooks.api.openapi import build_openapi
from sentinel_hooks.service import Service
from tests.api.test_openapi import violations
from tests.service.conftest import Starter
from tests.service.test_api import call

WATCHERS = {
    "hook.yaml": """\
id: hook
strategy: webhook
tags: [deploy]
conditions: [{path: level, op: eq, value: crit}]
fire: {eventName: crit_seen, priority: high}
deliveryTargets: [console]
""",
    "other.yaml": """\
id: other
strategy: webhook
deliveryTargets: [console]
""",
}
WATCHER_SILENCE = {"matchers": [{"path": "watcherId", "op": "eq", "value": "hook"}], "durationMs": 3_600_000}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    result: dict[str, Any] = json.loads(json.dumps(build_openapi()))
    return result


@pytest.fixture
async def service(start_service: Starter) -> Service:
    return await start_service(watchers=WATCHERS)


async def silence(service: Service, body: dict[str, Any] | None = None, **more: Any) -> dict[str, Any]:
    status, answer = await call(
        service,
        "POST",
        "/api/v1/silences",
        body={**(body or WATCHER_SILENCE), "comment": "deploying", **more},
        headers={"X-Sentinel-Actor": "ana"},
    )
    assert 201 == status, answer
    made: dict[str, Any] = answer["silence"]
    return made


async def test_a_created_silence_is_active_and_shown_listed_and_documented(
    service: Service, document: dict[str, Any]
) -> None:
    """POST → 201 active silence created by the actor; GET shows it; the list has it."""
    status, created = await call(
        service,
        "POST",
        "/api/v1/silences",
        body={**WATCHER_SILENCE, "comment": "deploying"},
        headers={"X-Sentinel-Actor": "ana"},
    )
    sid = created["silence"]["id"]
    shown = await call(service, "GET", f"/api/v1/silences/{sid}")
    listed = await call(service, "GET", "/api/v1/silences?state=active")
    problems = [
        *violations(document, "/api/v1/silences", "post", 201, created),
        *violations(document, "/api/v1/silences/{id}", "get", 200, shown[1]),
        *violations(document, "/api/v1/silences", "get", 200, listed[1]),
    ]
    assert (201, "active", "ana", created, [sid], []) == (
        status,
        created["silence"]["state"],
        created["silence"]["createdBy"],
        shown[1],
        [s["id"] for s in listed[1]["items"]],
        problems,
    )


async def test_a_manual_fire_under_a_silence_is_silenced_with_its_id(
    service: Service, document: dict[str, Any]
) -> None:
    """A manual fire answers state silenced; its contract names the silence; nothing is delivered."""
    made = await silence(service)
    status, fired = await call(service, "POST", "/api/v1/watchers/hook/fire", body={"payload": {}})
    _, shown = await call(service, "GET", f"/api/v1/callbacks/{fired['callbackId']}")
    problems = violations(document, "/api/v1/watchers/{id}/fire", "post", 202, fired)
    problems += violations(document, "/api/v1/callbacks/{id}", "get", 200, shown)
    assert (202, "silenced", made["id"], [], []) == (
        status,
        fired["state"],
        shown["callback"]["silencedBy"],
        shown["deliveries"],
        problems,
    )


async def test_another_watcher_still_fires(service: Service) -> None:
    """The silence's matchers decide: another watcher's manual fire is pending."""
    await silence(service)
    _, fired = await call(service, "POST", "/api/v1/watchers/other/fire", body={})
    assert "pending" == fired["state"]


async def test_an_ingested_event_under_a_silence_does_not_fire(service: Service) -> None:
    """Ingest answers fired: false and records a silenced contract."""
    made = await silence(
        service, {"matchers": [{"path": "tags", "op": "contains", "value": "deploy"}], "durationMs": 60_000}
    )
    status, answer = await call(service, "POST", "/hooks/ingest/hook", body={"level": "crit"})
    _, listed = await call(service, "GET", "/api/v1/callbacks?watcherId=hook")
    states = [(c["state"], c["silencedBy"]) for c in listed["items"]]
    assert (202, False, [("silenced", made["id"])]) == (status, answer["fired"], states)


async def test_an_external_envelope_under_a_silence_is_silenced(service: Service) -> None:
    """/hooks/sentinel envelopes are matched too (here on eventName and a payload path)."""
    matchers = [
        {"path": "eventName", "op": "eq", "value": "disk_full"},
        {"path": "payload.host", "op": "startsWith", "value": "db-"},
    ]
    await silence(service, {"matchers": matchers, "durationMs": 60_000})
    envelope = {
        "watcher": {"id": "ext", "eventName": "disk_full"},
        "trigger": {"matchedAt": "2026-01-01T00:00:00Z"},
        "payload": {"host": "db-1"},
        "delivery": {"targets": ["console"]},
    }
    muted = await call(service, "POST", "/hooks/sentinel", body=envelope)
    other = await call(service, "POST", "/hooks/sentinel", body={**envelope, "payload": {"host": "web-1"}})
    assert ((202, "silenced"), (202, "pending")) == (
        (muted[0], muted[1]["state"]),
        (other[0], other[1]["state"]),
    )


async def test_an_expired_silence_mutes_nothing(service: Service, document: dict[str, Any]) -> None:
    """DELETE expires it (200, state expired) and the next fire goes out."""
    made = await silence(service)
    status, expired = await call(service, "DELETE", f"/api/v1/silences/{made['id']}")
    _, fired = await call(service, "POST", "/api/v1/watchers/hook/fire", body={})
    problems = violations(document, "/api/v1/silences/{id}", "delete", 200, expired)
    assert (200, "expired", "pending", []) == (status, expired["silence"]["state"], fired["state"], problems)


async def test_a_pending_silence_mutes_nothing_yet(service: Service) -> None:
    """A silence that starts later is pending and lets fires through."""
    start = "2999-01-01T00:00:00Z"
    made = await silence(service, {**WATCHER_SILENCE, "startsAt": start})
    _, fired = await call(service, "POST", "/api/v1/watchers/hook/fire", body={})
    assert ("pending", "pending") == (made["state"], fired["state"])


async def test_watcher_status_shows_silenced_by(service: Service, document: dict[str, Any]) -> None:
    """GET /api/v1/watchers/{id} status.silencedBy names the silence; the other watcher's is null."""
    made = await silence(service)
    _, hook = await call(service, "GET", "/api/v1/watchers/hook")
    _, other = await call(service, "GET", "/api/v1/watchers/other")
    _, listed = await call(service, "GET", "/api/v1/watchers")
    problems = violations(document, "/api/v1/watchers/{id}", "get", 200, hook)
    problems += violations(document, "/api/v1/watchers", "get", 200, listed)
    by_id = {w["id"]: w["status"]["silencedBy"] for w in listed["items"]}
    assert (made["id"], None, {"hook": made["id"], "other": None}, []) == (
        hook["status"]["silencedBy"],
        other["status"]["silencedBy"],
        by_id,
        problems,
    )


async def test_ack_with_silence_for_ms_silences_the_items_watcher(
    service: Service, document: dict[str, Any]
) -> None:
    """Ack {note, silenceForMs}: the item is acked and its watcher silenced by the actor."""
    item = await service.inbox.create("escalation", severity="warning", reason="crit", watcher_id="hook")
    status, acked = await call(
        service,
        "POST",
        f"/api/v1/inbox/{item.id}/ack",
        body={"note": "on it", "silenceForMs": 7_200_000},
        headers={"X-Sentinel-Actor": "bo"},
    )
    _, fired = await call(service, "POST", "/api/v1/watchers/hook/fire", body={})
    silence_made = acked["silence"]
    problems = violations(document, "/api/v1/inbox/{id}/ack", "post", 200, acked)
    assert (
        200,
        "acked",
        "bo",
        "on it",
        [{"path": "watcherId", "op": "eq", "value": "hook"}],
        "silenced",
        [],
    ) == (
        status,
        acked["item"]["status"],
        silence_made["createdBy"],
        silence_made["comment"],
        silence_made["matchers"],
        fired["state"],
        problems,
    )


async def test_ack_with_silence_of_an_item_without_watcher_is_a_conflict(service: Service) -> None:
    """An item with no watcher cannot silence anything: 409, and it stays open."""
    item = await service.inbox.create("escalation", severity="warning", reason="odd")
    status, body = await call(service, "POST", f"/api/v1/inbox/{item.id}/ack", body={"silenceForMs": 1000})
    stored, _ = await service.inbox.get(item.id)
    assert (409, "open") == (status, stored.status), body


async def test_status_lists_active_silences(service: Service, document: dict[str, Any]) -> None:
    """GET /api/v1/status counts and lists the active silences (pending ones are not active)."""
    made = await silence(service)
    await silence(service, {**WATCHER_SILENCE, "startsAt": "2999-01-01T00:00:00Z"})
    status, body = await call(service, "GET", "/api/v1/status")
    problems = violations(document, "/api/v1/status", "get", 200, body)
    assert (200, 1, [made["id"]], 2, []) == (
        status,
        body["silences"]["active"],
        [s["id"] for s in body["silences"]["items"]],
        body["watchers"]["total"],
        problems,
    )


@pytest.mark.parametrize(
    ("body", "key"),
    [
        (
            {"matchers": [{"path": "watcher", "op": "eq", "value": "x"}], "durationMs": 1000},
            "matchers.0.path",
        ),
        (
            {"matchers": [{"path": "watcherId", "op": "eqq", "value": "x"}], "durationMs": 1000},
            "matchers.0.op",
        ),
        ({"matchers": [{"path": "payload.a", "op": "changed"}], "durationMs": 1000}, "matchers.0.op"),
        (
            {"matchers": [{"path": "payload.a", "op": "matches", "value": "("}], "durationMs": 1000},
            "matchers.0.value",
        ),
        ({"matchers": [], "durationMs": 1000}, "matchers"),
        ({"matchers": [{"path": "watcherId", "op": "eq", "value": "x"}]}, "endsAt"),
        (
            {
                "matchers": [{"path": "watcherId", "op": "eq", "value": "x"}],
                "durationMs": 1,
                "endsAt": "2999-01-01T00:00:00Z",
            },
            "endsAt",
        ),
        (
            {"matchers": [{"path": "watcherId", "op": "eq", "value": "x"}], "endsAt": "2000-01-01T00:00:00Z"},
            "endsAt",
        ),
        (
            {"matchers": [{"path": "watcherId", "op": "eq", "value": "x"}], "endsAt": "2999-01-01T00:00:00"},
            "endsAt",
        ),
        ({"matchers": [{"path": "watcherId", "op": "eq", "value": "x"}], "durationMs": "2h"}, "durationMs"),
        (
            {
                "matchers": [{"path": "watcherId", "op": "eq", "value": "x"}],
                "durationMs": 1000,
                "match": "some",
            },
            "match",
        ),
        (
            {"matchers": [{"path": "watcherId", "op": "eq", "value": "x"}], "durationMs": 1000, "extra": 1},
            "extra",
        ),
        (
            {
                "matchers": [{"path": "watcherId", "op": "eq", "value": "x"}],
                "startsAt": "9999-12-31T23:00:00Z",
                "durationMs": 86_400_000,
            },
            "durationMs",
        ),
        (
            {
                "matchers": [{"path": "watcherId", "op": "eq", "value": "x"}],
                "startsAt": "9999-12-31T23:00:00-05:00",
                "durationMs": 1000,
            },
            "startsAt",
        ),
        (
            {
                "matchers": [{"path": "watcherId", "op": "eq", "value": "x"}],
                "endsAt": "9999-12-31T23:30:00-01:00",
            },
            "endsAt",
        ),
    ],
)
async def test_bad_silences_are_400_naming_the_key(service: Service, body: dict[str, Any], key: str) -> None:
    """Unknown paths or operators, bad times and durations: 400 with the key; nothing stored."""
    status, answer = await call(service, "POST", "/api/v1/silences", body={"comment": "x", **body})
    _, listed = await call(service, "GET", "/api/v1/silences")
    keys = [d["key"] for d in answer["error"]["details"]]
    assert (400, True, []) == (status, key in keys, listed["items"]), answer


async def test_a_silence_without_comment_is_refused(service: Service) -> None:
    """The comment says why: required."""
    status, answer = await call(service, "POST", "/api/v1/silences", body=WATCHER_SILENCE)
    assert (400, "comment") == (status, answer["error"]["details"][0]["key"])


async def test_unknown_silence_is_404_and_bad_state_400(service: Service) -> None:
    """GET and DELETE of an unknown id are 404; ?state=bogus is 400."""
    shown = await call(service, "GET", "/api/v1/silences/nope")
    deleted = await call(service, "DELETE", "/api/v1/silences/nope")
    listed = await call(service, "GET", "/api/v1/silences?state=bogus")
    assert (404, 404, 400) == (shown[0], deleted[0], listed[0])


async def test_created_by_in_the_body_names_who_silenced(service: Service, document: dict[str, Any]) -> None:
    """createdBy, as Alertmanager's clients send it, is the silence's createdBy (over the actor
    header, SPEC §14), and the documented request body has it."""
    body = {**WATCHER_SILENCE, "comment": "deploying", "createdBy": " bob@example.com "}
    status, answer = await call(
        service, "POST", "/api/v1/silences", body=body, headers={"X-Sentinel-Actor": "ana"}
    )
    documented = document["components"]["schemas"]["SilenceBody"]["properties"]
    problems = violations(document, "/api/v1/silences", "post", 201, answer)
    assert (201, "bob@example.com", "string", []) == (
        status,
        answer["silence"]["createdBy"],
        documented["createdBy"]["type"],
        problems,
    )


@pytest.mark.parametrize("created_by", ["", "   ", 7, "x" * 201])
async def test_a_bad_created_by_is_400_naming_it(service: Service, created_by: Any) -> None:
    """createdBy must be 1 to 200 characters of text; nothing is stored otherwise."""
    body = {**WATCHER_SILENCE, "comment": "x", "createdBy": created_by}
    status, answer = await call(service, "POST", "/api/v1/silences", body=body)
    _, listed = await call(service, "GET", "/api/v1/silences")
    keys = [d["key"] for d in answer["error"]["details"]]
    assert (400, ["createdBy"], []) == (status, keys, listed["items"])


async def test_a_silence_for_an_unknown_watcher_is_made_with_a_warning(
    service: Service, document: dict[str, Any]
) -> None:
    """A watcherId matcher naming no watcher is accepted (an envelope may carry the id) but the
    answer warns, naming the id; a silence of known watchers has no warnings."""
    body = {"matchers": [{"path": "watcherId", "op": "in", "value": ["hook", "hookk"]}], "durationMs": 60_000}
    status, answer = await call(service, "POST", "/api/v1/silences", body={**body, "comment": "x"})
    _, known = await call(service, "POST", "/api/v1/silences", body={**WATCHER_SILENCE, "comment": "x"})
    problems = violations(document, "/api/v1/silences", "post", 201, answer)
    assert (201, 1, True, False, []) == (
        status,
        len(answer["warnings"]),
        "'hookk'" in answer["warnings"][0] and answer["warnings"][0].startswith("matchers.0:"),
        "warnings" in known,
        problems,
    ), answer


async def test_a_null_created_by_is_400(service: Service) -> None:
    """createdBy null is not a name: 400 naming it (the document says a string, or no createdBy)."""
    body = {**WATCHER_SILENCE, "comment": "x", "createdBy": None}
    status, answer = await call(service, "POST", "/api/v1/silences", body=body)
    assert (400, ["createdBy"]) == (status, [d["key"] for d in answer["error"]["details"]])
