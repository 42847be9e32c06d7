"""The audit trail through the API and the CLI (SPEC §21): a change is recorded with the token's name,
the claimed actor beside it, and the face it came through; a refused change is not recorded."""

from __future__ import annotations

import asyncio
import json
import os

from sentinel_hooks.service import Service
from tests.api.test_roles import ADMIN, OPERATOR, TOKENS, VIEWER, WEBHOOK, bearer
from tests.cli.conftest import sentinel_command
from tests.service.conftest import Starter
from tests.service.test_api import call
from tests.support import wait_for

SILENCE = {
    "matchers": [{"path": "watcherId", "op": "eq", "value": "hook"}],
    "durationMs": 60000,
    "comment": "x",
}


async def trail(service: Service, query: str = "") -> list[dict[str, object]]:
    status, body = await call(service, "GET", f"/api/v1/audit{query}", headers=bearer(VIEWER))
    assert 200 == status, body
    items: list[dict[str, object]] = body["items"]
    return items


async def test_changes_are_recorded_with_who_and_how(start_service: Starter) -> None:
    service = await start_service(watchers={"hook.yaml": WEBHOOK}, server=TOKENS)
    forged = bearer(OPERATOR, **{"X-Sentinel-Actor": "mallory", "X-Sentinel-Via": "web"})
    assert 201 == (await call(service, "POST", "/api/v1/silences", body=SILENCE, headers=forged))[0]
    assert (
        200
        == (
            await call(
                service, "PATCH", "/api/v1/watchers/hook", body={"enabled": False}, headers=bearer(ADMIN)
            )
        )[0]
    )
    refused = await call(
        service, "PATCH", "/api/v1/watchers/hook", body={"enabled": True}, headers=bearer(OPERATOR)
    )
    assert 403 == refused[0]
    found = await trail(service)
    assert [
        ("root", None, "api", "watcher.disable", "hook"),
        ("alice", "mallory", "web", "silence.create", found[1]["target"]),
    ] == [(e["actor"], e["claimedActor"], e["via"], e["action"], e["target"]) for e in found]
    assert ["watcher.disable"] == [e["action"] for e in await trail(service, "?actor=root")]
    every = json.dumps(found)
    assert not any(token in every for token in (VIEWER, OPERATOR, ADMIN))


async def test_whoami_names_the_token_and_its_role(start_service: Starter) -> None:
    service = await start_service(watchers={}, server=TOKENS)
    assert (200, {"name": "alice", "role": "operator"}) == await call(
        service, "GET", "/api/v1/whoami", headers=bearer(OPERATOR)
    )


async def test_a_bad_since_is_400(start_service: Starter) -> None:
    service = await start_service(watchers={}, server=TOKENS)
    status, body = await call(service, "GET", "/api/v1/audit?since=soon", headers=bearer(VIEWER))
    assert (400, "invalid_since") == (status, body["error"]["code"])


async def test_the_cli_acts_with_a_token_and_lists_the_audit(start_service: Starter) -> None:
    """`sentinel watchers disable` with an admin token is recorded via cli; `sentinel audit --actor`
    (a real subprocess) lists it."""
    service = await start_service(watchers={"hook.yaml": WEBHOOK}, server=TOKENS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}

    async def sentinel(*args: str, token: str) -> bytes:
        process = await asyncio.create_subprocess_exec(
            *sentinel_command(),
            *args,
            "--url",
            service.url,
            "--token",
            token,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
        assert 0 == process.returncode, stderr
        return stdout

    await sentinel("watchers", "disable", "hook", token=ADMIN)
    listed = json.loads(await sentinel("audit", "--since", "1h", "--actor", "root", "--json", token=VIEWER))
    assert [("root", "cli", "watcher.disable")] == [
        (e["actor"], e["via"], e["action"]) for e in listed["items"]
    ]


async def test_an_expired_approval_is_in_the_audit_trail(start_service: Starter) -> None:
    """An approval nobody decided within approvalTimeoutMs is expired by sentinel, and the audit
    trail records it like an approve or a deny (SPEC §21: every change)."""
    service = await start_service(
        watchers={"hook.yaml": WEBHOOK}, server=TOKENS, extra="actionPolicy: {approvalTimeoutMs: 1}\n"
    )
    item = await service.inbox.create("approval", severity="info", reason="run restart-api", actor="agent")
    expire = service.sessions.approvals.expire_overdue  # what the sweep runs (it may run first)

    async def expired() -> list[dict[str, object]]:
        await expire()  # once the item is older than the 1 ms approvalTimeoutMs
        return await trail(service)

    await wait_for(expired, what="the expiry in the audit trail")
    assert 0 == await expire(), "nothing left to expire"
    assert [("sentinel", None, "source", "approval.expire", item.id, "approvalTimeoutMs passed")] == [
        (e["actor"], e["claimedActor"], e["via"], e["action"], e["target"], e["note"])
        for e in await trail(service)
    ]
