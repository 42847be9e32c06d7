"""Query parameters out of range, unknown sessions, 405 answers and bodiless moves (SPEC §9)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import aiohttp
import pytest

from sentinel_hooks.service import Service
from tests.api.raw_http import raw_status
from tests.service.conftest import Starter
from tests.service.test_api import call

INT64_MAX = 2**63 - 1
NOT_INTEGERS = ["-1", "1.5", "1e3", "0x10", " 1", "²", "\u0661", "abc", str(INT64_MAX + 1)]
NOT_INTEGERS += ["9223372036854775809"]
"""Not a non-negative integer SQLite can hold: signs, decimals, other digits (``'²'.isdigit()``), overflow."""

SESSION = "sentinel:hooks:watcher:w1"
LISTINGS = ["/api/v1/watchers", "/api/v1/callbacks", "/api/v1/inbox", f"/api/v1/sessions/{SESSION}"]


@pytest.fixture
async def service(start_service: Starter) -> Service:
    """A service whose hook session ``SESSION`` has two transcript entries."""
    service = await start_service(watchers={})
    at = datetime(2026, 1, 1, tzinfo=UTC)
    await service.store.append_transcript(SESSION, [{"role": "user"}, {"role": "assistant"}], at=at)
    return service


@pytest.mark.parametrize("after", NOT_INTEGERS)
async def test_after_seq_that_is_not_an_int64_is_400(service: Service, after: str) -> None:
    """afterSeq must be an integer from 0 to 2^63-1 (a larger one overflowed SQLite: 500)."""
    status, body = await call(service, "GET", f"/api/v1/sessions/{SESSION}?afterSeq={after}")
    assert (400, "invalid_after") == (status, body["error"]["code"])


async def test_after_seq_at_the_top_of_the_range_is_an_empty_page(service: Service) -> None:
    """afterSeq 2^63-1 is valid: nothing comes after it."""
    status, body = await call(service, "GET", f"/api/v1/sessions/{SESSION}?afterSeq={INT64_MAX}")
    assert (200, []) == (status, body["transcript"])


async def test_after_seq_pages_through_a_known_session(service: Service) -> None:
    """Entries after afterSeq are returned; past the end the page is empty, not 404."""
    _, after_one = await call(service, "GET", f"/api/v1/sessions/{SESSION}?afterSeq=1")
    status, past_end = await call(service, "GET", f"/api/v1/sessions/{SESSION}?afterSeq=5")
    assert ([2], (200, [])) == ([e["seq"] for e in after_one["transcript"]], (status, past_end["transcript"]))


@pytest.mark.parametrize("query", ["", "?afterSeq=0", "?afterSeq=5", "?afterSeq=3&limit=1"])
async def test_an_unknown_session_is_404_with_or_without_after_seq(service: Service, query: str) -> None:
    """A session with no transcript is 404 whatever afterSeq says."""
    status, body = await call(service, "GET", f"/api/v1/sessions/nope{query}")
    assert (404, "not_found") == (status, body["error"]["code"])


@pytest.mark.parametrize("limit", [*NOT_INTEGERS, "0", "100000"])
@pytest.mark.parametrize("path", LISTINGS)
async def test_a_limit_out_of_range_is_400(service: Service, path: str, limit: str) -> None:
    """limit must be a plain integer within the listing's range on every listing."""
    status, body = await call(service, "GET", f"{path}?limit={limit}")
    assert (400, "invalid_limit") == (status, body["error"]["code"])


@pytest.mark.parametrize("path", ["/api/v1/callbacks", "/api/v1/inbox"])
@pytest.mark.parametrize("inside", ["99999999999999999999999:x", "1e3:x", "²:x", "-1:x"])
async def test_a_forged_cursor_is_400(service: Service, path: str, inside: str) -> None:
    """A cursor holding an out-of-range or non-integer time is invalid (it overflowed SQLite: 500)."""
    cursor = base64.urlsafe_b64encode(inside.encode()).decode().rstrip("=")
    status, body = await call(service, "GET", f"{path}?cursor={cursor}")
    assert (400, "invalid_cursor") == (status, body["error"]["code"])


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("DELETE", "/api/v1/inbox", {"GET"}),
        ("PUT", "/api/v1/watchers/w1", {"GET", "PATCH", "DELETE"}),
        ("GET", "/hooks/sentinel", {"POST"}),
        ("POST", "/healthz", {"GET"}),
    ],
)
async def test_405_names_the_allowed_methods(
    service: Service, method: str, path: str, allowed: set[str]
) -> None:
    """A method the route does not have is 405 with an Allow header (RFC 9110) and the JSON error."""
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, service.url + path) as response,
    ):
        status, header, body = response.status, response.headers.get("Allow", ""), await response.json()
    named = {m.strip() for m in header.split(",")} - {"HEAD"}
    assert (405, allowed, "method_not_allowed") == (status, named, body["error"]["code"])


MOVES = [("inbox", "ack", "escalation"), ("inbox", "resolve", "escalation")]
MOVES += [("approvals", "approve", "approval"), ("approvals", "deny", "approval")]


@pytest.mark.parametrize(("area", "action", "kind"), MOVES)
async def test_a_move_needs_no_body_and_no_content_type(
    service: Service, area: str, action: str, kind: str
) -> None:
    """POST …/ack (resolve, approve, deny) with no body and no Content-Type is accepted."""
    item = await service.inbox.create(kind, severity="warning", reason="r")  # type: ignore[arg-type]
    status, body = await call(service, "POST", f"/api/v1/{area}/{item.id}/{action}")
    stored = (await service.inbox.get(item.id))[0]
    assert (200, stored.status) == (status, body["item"]["status"])
    assert "open" != stored.status


async def test_a_move_without_content_length_is_accepted(service: Service) -> None:
    """A bare POST (as ``curl -X POST`` sends it: no Content-Length, no Content-Type) acks the item."""
    item = await service.inbox.create("escalation", severity="warning", reason="r")
    request = f"POST /api/v1/inbox/{item.id}/ack HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    assert 200 == await raw_status(service, request)
    assert "acked" == (await service.inbox.get(item.id))[0].status


async def test_a_move_with_a_body_that_is_not_json_is_415(service: Service) -> None:
    """A non-empty body must still be labelled JSON (a browser form cannot ack)."""
    item = await service.inbox.create("escalation", severity="warning", reason="r")
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    status, _ = await call(service, "POST", f"/api/v1/inbox/{item.id}/ack", raw=b"note=x", headers=form)
    assert (415, "open") == (status, (await service.inbox.get(item.id))[0].status)


@pytest.mark.parametrize("path", LISTINGS)
async def test_a_query_parameter_given_twice_is_400(service: Service, path: str) -> None:
    """?limit=1&limit=500 is refused naming limit (the first was used, the second ignored)."""
    status, body = await call(service, "GET", f"{path}?limit=1&limit=500")
    assert (400, "invalid_query", {"parameter": "limit"}) == (
        status,
        body["error"]["code"],
        body["error"]["details"],
    )


@pytest.mark.parametrize("path", LISTINGS)
async def test_an_empty_limit_is_no_limit(service: Service, path: str) -> None:
    """?limit= is the same as no limit (the document says so with allowEmptyValue)."""
    status, _ = await call(service, "GET", f"{path}?limit=")
    assert 200 == status
