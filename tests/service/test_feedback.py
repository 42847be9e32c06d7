"""Feedback on a fire (SPEC §22): `POST /api/v1/callbacks/{id}/feedback`, the latest per person
counts, shown by `GET /api/v1/callbacks/{id}` and `sentinel callbacks show`."""

from __future__ import annotations

from pathlib import Path

from sentinel_hooks.service import Service
from tests.cli.conftest import remote_lines
from tests.service.conftest import Starter
from tests.service.test_api import call
from tests.service.test_callback_explained import WATCHER


async def fired(start_service: Starter) -> tuple[Service, str]:
    service = await start_service(watchers={"gas.yaml": WATCHER})
    status, accepted = await call(service, "POST", "/api/v1/watchers/gas/fire", body={"payload": {}})
    assert 202 == status
    return service, accepted["callbackId"]


async def test_the_latest_per_person_counts_and_is_shown(start_service: Starter, tmp_path: Path) -> None:
    service, cid = await fired(start_service)
    path = f"/api/v1/callbacks/{cid}/feedback"
    ana = {"X-Sentinel-Actor": "ana"}
    assert 200 == (await call(service, "POST", path, body={"useful": True}, headers=ana))[0]
    await call(
        service, "POST", path, body={"useful": True, "note": "right host"}, headers={"X-Sentinel-Actor": "bo"}
    )
    status, now = await call(service, "POST", path, body={"useful": False, "note": "too late"}, headers=ana)
    assert 200 == status
    assert {"useful": 1, "notUseful": 1} == now["counts"]
    assert [("bo", True, "right host"), ("ana", False, "too late")] == [
        (i["person"], i["useful"], i["note"]) for i in now["items"]
    ]
    _, body = await call(service, "GET", f"/api/v1/callbacks/{cid}")
    assert now == body["feedback"]

    lines = await remote_lines(service.url, tmp_path, "callbacks", "show", cid)
    start = lines.index("feedback: 1 👍 1 👎")
    assert ("👍 bo at ", "— right host") == (lines[start + 1][:8], lines[start + 1][-12:])
    assert ("👎 ana at ", "— too late") == (lines[start + 2][:9], lines[start + 2][-10:])


async def test_bad_feedback_is_refused_clearly(start_service: Starter) -> None:
    service, cid = await fired(start_service)
    path = f"/api/v1/callbacks/{cid}/feedback"
    status, body = await call(service, "POST", path, body={"useful": "yes"})
    assert (400, "invalid_feedback") == (status, body["error"]["code"])
    assert 'useful must be true or false, got "yes"' == body["error"]["message"]
    status, body = await call(service, "POST", path, body={"useful": True, "stars": 5})
    assert (400, "invalid_feedback") == (status, body["error"]["code"])
    status, body = await call(service, "POST", path, body={"useful": True, "note": "x" * 2001})
    assert (400, "invalid_note") == (status, body["error"]["code"])
    status, body = await call(service, "POST", "/api/v1/callbacks/nope/feedback", body={"useful": True})
    assert (404, "not_found") == (status, body["error"]["code"])
    _, shown = await call(service, "GET", f"/api/v1/callbacks/{cid}")
    assert {"counts": {"useful": 0, "notUseful": 0}, "items": []} == shown["feedback"]
