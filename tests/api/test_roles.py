"""Named tokens with roles (SPEC §21): the role each route needs comes from the endpoint
declarations, a token whose role is not enough gets 403 and changes nothing, and the actor of a
change is the token's name with what the caller claims kept beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.endpoints import ENDPOINTS
from sentinel_hooks.errors import ConfigError
from sentinel_hooks.service import Service
from tests.conftest import BASE_CONFIG, Writer
from tests.service.conftest import Starter
from tests.service.test_api import call

WEBHOOK = """\
id: hook
strategy: webhook
deliveryTargets: [console]
"""
VIEWER, OPERATOR, ADMIN = "viewer-0123456789abcdef", "operator-0123456789abcdef", "admin-0123456789abcdef"
TOKENS = (
    "{host: 127.0.0.1, port: 0, tokens: ["
    f"{{name: grafana, token: {VIEWER}, role: viewer}}, "
    f"{{name: alice, token: {OPERATOR}, role: operator}}, "
    f"{{name: root, token: {ADMIN}, role: admin}}]}}"
)
NEW_WATCHER = {"id": "made", "strategy": "webhook", "deliveryTargets": ["console"]}


def bearer(token: str, **more: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **more}


@pytest.fixture
async def service(start_service: Starter) -> Service:
    return await start_service(watchers={"hook.yaml": WEBHOOK}, server=TOKENS)


def test_every_route_that_takes_a_token_declares_its_role() -> None:
    """A route without a declared role would be open to every token: the declarations must say."""
    missing = [f"{e.method} {e.path}" for e in ENDPOINTS if e.auth == "bearer" and e.role is None]
    stray = [f"{e.method} {e.path}" for e in ENDPOINTS if e.auth != "bearer" and e.role is not None]
    assert ([], []) == (missing, stray)


def test_reads_are_for_viewers_and_writes_are_not() -> None:
    """Every GET is a viewer's; every write needs more."""
    for endpoint in ENDPOINTS:
        if endpoint.role is None or endpoint.path == "/mcp":
            continue
        assert (endpoint.method == "GET") == (endpoint.role == "viewer"), endpoint.path


async def test_a_viewer_reads_and_is_refused_a_fire(service: Service) -> None:
    """403 forbidden, before the handler: no contract is made."""
    assert 200 == (await call(service, "GET", "/api/v1/watchers", headers=bearer(VIEWER)))[0]
    status, body = await call(service, "POST", "/api/v1/watchers/hook/fire", body={}, headers=bearer(VIEWER))
    assert (403, "forbidden") == (status, body["error"]["code"])
    assert {"role": "viewer", "needed": "operator"} == body["error"]["details"]
    assert VIEWER not in str(body)
    assert [] == (await service.store.list_contracts(limit=10)).items


async def test_an_operator_fires_but_cannot_create_watchers(service: Service) -> None:
    fired = await call(service, "POST", "/api/v1/watchers/hook/fire", body={}, headers=bearer(OPERATOR))
    assert 202 == fired[0]
    status, body = await call(service, "POST", "/api/v1/watchers", body=NEW_WATCHER, headers=bearer(OPERATOR))
    assert (403, "forbidden") == (status, body["error"]["code"])
    assert 404 == (await call(service, "GET", "/api/v1/watchers/made", headers=bearer(OPERATOR)))[0]


async def test_an_admin_creates_and_deletes(service: Service) -> None:
    created = await call(service, "POST", "/api/v1/watchers", body=NEW_WATCHER, headers=bearer(ADMIN))
    assert 201 == created[0]
    assert 204 == (await call(service, "DELETE", "/api/v1/watchers/made", headers=bearer(ADMIN)))[0]


async def test_the_actor_is_the_tokens_name_not_the_claim(service: Service) -> None:
    """A forged X-Sentinel-Actor (or createdBy) does not replace the token's name."""
    body = {"matchers": [{"path": "watcherId", "op": "eq", "value": "hook"}], "durationMs": 60000}
    forged = bearer(OPERATOR, **{"X-Sentinel-Actor": "mallory"})
    status, answer = await call(
        service, "POST", "/api/v1/silences", body={**body, "comment": "x"}, headers=forged
    )
    assert (201, "alice") == (status, answer["silence"]["createdBy"])
    claimed = {**body, "comment": "y", "createdBy": "bob"}
    status, answer = await call(service, "POST", "/api/v1/silences", body=claimed, headers=bearer(OPERATOR))
    assert (201, "alice") == (status, answer["silence"]["createdBy"])


async def test_an_unknown_token_is_401(service: Service) -> None:
    status, body = await call(service, "GET", "/api/v1/watchers", headers=bearer("nobody-0123456789abcdef"))
    assert (401, "unauthorized") == (status, body["error"]["code"])


@pytest.mark.parametrize(
    ("tokens", "found"),
    [
        ("[{name: a, token: short, role: viewer}]", "at least 16 characters"),
        (
            "[{name: a, token: same-0123456789abcdef, role: viewer}, {name: b, token: same-0123456789abcdef, "
            "role: admin}]",
            "also another's",
        ),
        (
            "[{name: a, token: one-0123456789abcdef, role: viewer}, {name: a, token: two-0123456789abcdef, "
            "role: admin}]",
            "used twice",
        ),
        ("[{name: a, token: one-0123456789abcdef, role: root}]", "viewer, operator, admin"),
    ],
)
def test_bad_tokens_are_config_errors_at_their_line(project: Writer, tokens: str, found: str) -> None:
    """Short, shared or duplicate-named tokens, or an unknown role: an error at server's line, never
    showing the token."""
    path: Path = project(BASE_CONFIG + f"server:\n  tokens: {tokens}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    issue = caught.value.issues[0]
    assert found in issue.message
    assert (Path(issue.file).name, issue.line) == ("sentinel.yaml", 8)
    assert "0123456789abcdef" not in issue.message


def test_an_api_token_is_one_more_admin_token(project: Writer) -> None:
    """apiToken shares no secret with a named token, and the name admin is its."""
    text = BASE_CONFIG + (
        "server:\n  apiToken: same-0123456789abcdef\n"
        "  tokens: [{name: x, token: same-0123456789abcdef, role: viewer}]\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_config(project(text), environ={})
    assert "also another's" in caught.value.issues[0].message


def test_every_token_is_compared_whichever_matches() -> None:
    """The same work for a known and an unknown token: each lookup compares against every
    configured token (counted through the standard library's constant-time compare)."""
    import hmac
    from unittest import mock

    from sentinel_hooks.api.access import Tokens
    from sentinel_hooks.config.service import ServerSpec

    server = ServerSpec.model_validate(
        {"tokens": [{"name": n, "token": f"{n}-0123456789abcdef", "role": "viewer"} for n in ("a", "b", "c")]}
    )
    tokens = Tokens(server)
    counts = []
    for given in ("a-0123456789abcdef", "c-0123456789abcdef", "unknown-0123456789abcdef"):
        with mock.patch(
            "sentinel_hooks.api.access.hmac.compare_digest", wraps=hmac.compare_digest
        ) as compare:
            tokens.identify(given)
        counts.append(compare.call_count)
    assert [3, 3, 3] == counts
    found = tokens.identify("a-0123456789abcdef")
    assert found is not None
    assert ("a", "viewer") == (found.name, found.role)
