"""``POST /hooks/sentinel``: an external callbackId is kept, refused when malformed, 409 when taken.

SPEC §9; run on every store backend, since each must take such ids and refuse a taken one atomically.
"""

from __future__ import annotations

import asyncio
from typing import Any, get_args

import pytest

from sentinel_hooks.service import Service
from sentinel_hooks.store.records import ContractState
from tests.service.conftest import Starter
from tests.service.test_api import call

KEPT_IDS = ["ci:build.42_x-Y", "a", "x" * 128, "01J9Z8Q1V6K0000000000000AB", "deploy-2026-01-01T10:00:00.5Z"]
REFUSED_IDS: list[Any] = ["", "a b", "x" * 129, "é", "a/b", "a\n", "a\nb", "a%2Fb", "tab\tid", 42, None]


def envelope(**fields: Any) -> dict[str, Any]:
    """An external envelope, with ``fields`` (``callbackId=…``) added."""
    body: dict[str, Any] = {
        "watcher": {"id": "ci", "eventName": "deploy_failed"},
        "trigger": {"matchedAt": "2026-01-01T00:00:00Z", "priority": "high"},
        "delivery": {"targets": ["console"], "timeoutMs": 600_000},
    }
    return {**body, **fields}


@pytest.fixture
def redis_db() -> int:
    """These tests' own database of the tests' redis-server (``redis_url``)."""
    return 9


@pytest.fixture(params=["sqlite", "memory", pytest.param("redis", marks=pytest.mark.redis)])
async def service(request: pytest.FixtureRequest, start_service: Starter) -> Service:
    """A service on each store backend."""
    stores = {"sqlite": "sqlite:///state.db", "memory": "memory://"}
    store = stores.get(request.param) or request.getfixturevalue("redis_url")
    return await start_service(watchers={}, store=store)


@pytest.mark.parametrize("callback_id", KEPT_IDS)
async def test_an_external_callback_id_is_kept(service: Service, callback_id: str) -> None:
    """Any id of 1 to 128 characters from A-Za-z0-9._:- is the callback's id, and can be shown."""
    status, body = await call(service, "POST", "/hooks/sentinel", body=envelope(callbackId=callback_id))
    assert (202, callback_id) == (status, body["callbackId"])
    status, shown = await call(service, "GET", f"/api/v1/callbacks/{callback_id}")
    assert (200, callback_id) == (status, shown["callback"]["callbackId"])


async def test_without_a_callback_id_one_is_made(service: Service) -> None:
    """An envelope without callbackId gets a fresh ULID."""
    status, body = await call(service, "POST", "/hooks/sentinel", body=envelope())
    assert (202, 26) == (status, len(body["callbackId"]))


@pytest.mark.parametrize("callback_id", REFUSED_IDS)
async def test_a_malformed_callback_id_is_400(start_service: Starter, callback_id: Any) -> None:
    """An id outside that form is an invalid envelope, and nothing is stored."""
    service = await start_service(watchers={})
    status, body = await call(service, "POST", "/hooks/sentinel", body=envelope(callbackId=callback_id))
    assert (400, "invalid_envelope") == (status, body["error"]["code"])
    assert "callbackId" in body["error"]["message"]
    assert [] == (await service.store.list_contracts(limit=10)).items


async def test_a_used_callback_id_is_409(service: Service) -> None:
    """The same callbackId again is 409 callback_exists naming the id and the callback's state."""
    first, _ = await call(service, "POST", "/hooks/sentinel", body=envelope(callbackId="ci:run-7"))
    status, body = await call(service, "POST", "/hooks/sentinel", body=envelope(callbackId="ci:run-7"))
    error = body["error"]
    assert (202, 409, "callback_exists") == (first, status, error["code"])
    assert ("ci:run-7", True) == (
        error["details"]["callbackId"],
        error["details"]["state"] in get_args(ContractState),
    )
    assert 1 == len((await service.store.list_contracts(limit=10)).items)


async def test_racing_posts_of_one_callback_id_make_one_callback(service: Service) -> None:
    """Eight concurrent POSTs of one id: exactly one is accepted, seven are 409, one contract stored."""
    posts = [call(service, "POST", "/hooks/sentinel", body=envelope(callbackId="race:1")) for _ in range(8)]
    statuses = sorted(status for status, _ in await asyncio.gather(*posts))
    assert [202] + [409] * 7 == statuses
    assert ["race:1"] == [c.callback_id for c in (await service.store.list_contracts(limit=10)).items]


@pytest.mark.parametrize(
    ("fields", "key"),
    [
        ({"trigger": {"matchedAt": "yesterday"}}, "trigger.matchedAt"),
        ({"trigger": {"matchedAt": "2026-01-01T00:00:00"}}, "trigger.matchedAt"),
        ({"trigger": {"matchedAt": "9999-12-31T23:00:00-05:00"}}, "trigger.matchedAt"),
        ({"trigger": {"matchedAt": 1767225600}}, "trigger.matchedAt"),
        ({"source": "monitoring"}, "source"),
        ({"source": ["monitoring"]}, "source"),
        ({"source": {"service": 5}}, "source.service"),
        ({"source": {"service": "ci", "route": "elsewhere"}}, "source.route"),
        ({"delivery": {"targets": ["console"], "timeoutMs": "600000"}}, "delivery.timeoutMs"),
        ({"watcher": {"id": "ci", "eventName": "deploy_failed", "fireOnce": "true"}}, "watcher.fireOnce"),
    ],
)
async def test_an_invalid_envelope_is_400_naming_the_key(
    start_service: Starter, fields: dict[str, Any], key: str
) -> None:
    """A time that is not ISO 8601 with a zone, a source that is not an object, a value of the wrong
    type (never converted): 400 in the house format naming the key, and nothing is stored."""
    service = await start_service(watchers={})
    status, body = await call(service, "POST", "/hooks/sentinel", body=envelope(**fields))
    assert (400, "invalid_envelope") == (status, body["error"]["code"])
    assert [key] == [detail["key"] for detail in body["error"]["details"]]
    assert body["error"]["message"].startswith(f"invalid envelope: {key}: ")
    assert [] == (await service.store.list_contracts(limit=10)).items


async def test_a_valid_envelope_keeps_its_time_and_service(start_service: Starter) -> None:
    """matchedAt with an offset is kept as the same instant in the API's form; source.service is kept
    and the route is /hooks/sentinel."""
    service = await start_service(watchers={})
    sent = envelope(trigger={"matchedAt": "2026-01-01T02:00:00+02:00"}, source={"service": "ci"})
    status, body = await call(service, "POST", "/hooks/sentinel", body=sent)
    assert 202 == status
    _, shown = await call(service, "GET", f"/api/v1/callbacks/{body['callbackId']}")
    kept = shown["envelope"]
    assert ("2026-01-01T00:00:00.000Z", {"service": "ci", "route": "/hooks/sentinel"}) == (
        kept["trigger"]["matchedAt"],
        kept["source"],
    )


async def test_a_huge_timeout_is_400_not_500(start_service: Starter) -> None:
    """delivery.timeoutMs of 10^20 ms is refused naming the key (the deadline overflowed: 500)."""
    service = await start_service(watchers={})
    sent = envelope(delivery={"targets": ["console"], "timeoutMs": 10**20})
    status, body = await call(service, "POST", "/hooks/sentinel", body=sent)
    assert (400, ["delivery.timeoutMs"]) == (status, [d["key"] for d in body["error"]["details"]])


async def test_an_envelope_of_the_year_30_is_shown_as_sent(start_service: Starter) -> None:
    """An envelope whose matchedAt is in the year 30 is stored so that it reads back: the callback
    shows it (it was stored as '30-…' and every read of it failed)."""
    service = await start_service(watchers={})
    sent = envelope(trigger={"matchedAt": "0030-10-24T09:22:19.230Z"})
    _, accepted = await call(service, "POST", "/hooks/sentinel", body=sent)
    status, shown = await call(service, "GET", f"/api/v1/callbacks/{accepted['callbackId']}")
    assert (200, "0030-10-24T09:22:19.230Z") == (status, shown["envelope"]["trigger"]["matchedAt"])
