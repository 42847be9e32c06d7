"""How pushes to /hooks/ingest prove themselves, and includeHeaders (SPEC.md §3, §16)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from sentinel_hooks.api.ingest_auth import basic_credentials, credentials_ok, signature_ok
from sentinel_hooks.config.ingest import IngestAuthSpec
from sentinel_hooks.store.shortcuts import last_observation
from tests.service.conftest import Starter
from tests.service.test_api import call

BEARER = """\
id: hook
strategy: webhook
auth: {bearerToken: "s3cret-bearer-token"}
deliveryTargets: [console]
"""
BASIC = """\
id: hook
strategy: webhook
auth: {basic: {username: alertmanager, password: "pa:ss-w0rd"}}
deliveryTargets: [console]
"""
GITHUB = """\
id: gh
strategy: webhook
secret: gh-hook-secret
signatureHeader: X-Hub-Signature-256
includeHeaders: [X-GitHub-Event, X-GitHub-Delivery]
conditions: [{path: _headers.X-GitHub-Event, op: eq, value: push}]
deliveryTargets: [console]
"""
JSON = {"Content-Type": "application/json"}


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize(
    "authorization",
    ["Bearer s3cret-bearer-token", "bearer s3cret-bearer-token", "BEARER   s3cret-bearer-token"],
)
async def test_the_bearer_token_is_accepted_in_any_scheme_case(
    start_service: Starter, authorization: str
) -> None:
    """The watcher's bearer token lets the push in (the scheme is case-insensitive)."""
    service = await start_service(watchers={"h.yaml": BEARER})
    headers = {**JSON, "Authorization": authorization}
    assert (202, {"accepted": True, "fired": True}) == await call(
        service, "POST", "/hooks/ingest/hook", body={"x": 1}, headers=headers
    )


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer wrong-token",
        "Bearer s3cret-bearer-token-and-more",
        "Bearer",
        "s3cret-bearer-token",
        "Basic czNjcmV0LWJlYXJlci10b2tlbg==",
        "Bearer s3cret-bearer-t\u00f6ken",
    ],
)
async def test_a_missing_or_wrong_bearer_token_is_401_and_stores_nothing(
    start_service: Starter, authorization: str | None
) -> None:
    """Every wrong Authorization gets the same 401, which does not say what was wrong."""
    service = await start_service(watchers={"h.yaml": BEARER})
    headers = dict(JSON)
    if authorization is not None:
        headers["Authorization"] = authorization
    body = json.dumps({"x": 1}).encode()
    status, answer = await call(service, "POST", "/hooks/ingest/hook", raw=body, headers=headers)
    assert (401, "unauthorized") == (status, answer["error"]["code"])
    assert "credentials" in answer["error"]["message"]
    assert await last_observation(service.store, "hook") is None


async def test_basic_credentials_are_accepted_and_wrong_ones_refused(start_service: Starter) -> None:
    """auth: basic takes the right user and password (a colon in the password is fine); a wrong
    user, a wrong password or a malformed header get the same 401."""
    service = await start_service(watchers={"h.yaml": BASIC})
    good = {**JSON, "Authorization": basic("alertmanager", "pa:ss-w0rd")}
    assert 202 == (await call(service, "POST", "/hooks/ingest/hook", body={"x": 1}, headers=good))[0]
    refusals = []
    for authorization in (
        basic("alertmanager", "wrong"),
        basic("someone", "pa:ss-w0rd"),
        "Basic not-base64!",
        "Basic " + base64.b64encode(b"no-colon").decode(),
        "Bearer pa:ss-w0rd",
    ):
        headers = {**JSON, "Authorization": authorization}
        status, answer = await call(service, "POST", "/hooks/ingest/hook", body={"x": 1}, headers=headers)
        refusals.append((status, answer["error"]["message"]))
    assert [(401, refusals[0][1])] * 5 == refusals


def test_basic_credentials_parse_like_rfc_7617() -> None:
    """user:password split at the first colon; the scheme in any case; bad base64 is None."""
    assert (b"u", b"p:q") == basic_credentials("basic " + base64.b64encode(b"u:p:q").decode())
    assert None is basic_credentials("Basic ***")


def test_basic_compares_both_parts_even_when_the_user_is_wrong() -> None:
    """credentials_ok refuses a right password under a wrong user, and the reverse."""
    auth = IngestAuthSpec.model_validate({"basic": {"username": "u", "password": "p"}})
    answers = [credentials_ok(auth, basic(u, p)) for u, p in (("u", "p"), ("x", "p"), ("u", "x"))]
    assert [True, False, False] == answers


async def test_github_signature_and_headers_reach_the_conditions(start_service: Starter) -> None:
    """GitHub's X-Hub-Signature-256 is checked with the secret, and X-GitHub-Event is in the
    observation under _headers (names as written), so conditions can pick the event."""
    service = await start_service(watchers={"g.yaml": GITHUB})
    body = json.dumps({"ref": "refs/heads/main"}).encode()
    digest = hmac.new(b"gh-hook-secret", body, hashlib.sha256).hexdigest()
    headers = {
        **JSON,
        "X-Hub-Signature-256": f"sha256={digest}",
        "x-github-event": "push",
        "X-GitHub-Delivery": "72d3162e",
    }
    answer = await call(service, "POST", "/hooks/ingest/gh", raw=body, headers=headers)
    ping = await call(
        service, "POST", "/hooks/ingest/gh", raw=body, headers={**headers, "x-github-event": "ping"}
    )
    unsigned = await call(
        service, "POST", "/hooks/ingest/gh", raw=body, headers={**JSON, "x-github-event": "push"}
    )
    assert [(202, True), (202, False), (401, None)] == [
        (status, got.get("fired")) for status, got in (answer, ping, unsigned)
    ]
    last = await last_observation(service.store, "gh")
    assert last is not None
    expected = {
        "ref": "refs/heads/main",
        "_headers": {"X-GitHub-Event": "ping", "X-GitHub-Delivery": "72d3162e"},
    }
    assert expected == last.value


async def test_github_form_encoding_is_415(start_service: Starter) -> None:
    """GitHub's default content type (form-encoded) is refused: the docs say to pick JSON."""
    service = await start_service(watchers={"g.yaml": GITHUB})
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    status, answer = await call(service, "POST", "/hooks/ingest/gh", raw=b"payload=%7B%7D", headers=headers)
    assert (415, "unsupported_media_type") == (status, answer["error"]["code"])


async def test_headers_are_not_added_to_a_body_that_is_not_an_object(start_service: Starter) -> None:
    """An array body stays as sent; a missing listed header is left out of _headers."""
    service = await start_service(
        watchers={
            "g.yaml": GITHUB.replace("secret: gh-hook-secret\n", "auth: none\n").replace(
                "signatureHeader: X-Hub-Signature-256\n", ""
            )
        }
    )
    await call(service, "POST", "/hooks/ingest/gh", body=[1, 2], headers=JSON)
    array = await last_observation(service.store, "gh")
    await call(service, "POST", "/hooks/ingest/gh", body={"a": 1}, headers={**JSON, "X-GitHub-Event": "push"})
    obj = await last_observation(service.store, "gh")
    assert array is not None
    assert obj is not None
    assert ([1, 2], {"a": 1, "_headers": {"X-GitHub-Event": "push"}}) == (array.value, obj.value)


async def test_auth_none_and_no_auth_on_loopback_take_pushes(start_service: Starter) -> None:
    """auth: none (and, on loopback, saying nothing) accepts an unauthenticated push."""
    written = BEARER.replace('auth: {bearerToken: "s3cret-bearer-token"}', "auth: none")
    silent = BEARER.replace('auth: {bearerToken: "s3cret-bearer-token"}\n', "").replace(
        "id: hook", "id: quiet"
    )
    service = await start_service(watchers={"h.yaml": written, "q.yaml": silent})
    first = await call(service, "POST", "/hooks/ingest/hook", body={"x": 1}, headers=JSON)
    second = await call(service, "POST", "/hooks/ingest/quiet", body={"x": 1}, headers=JSON)
    assert (202, 202) == (first[0], second[0])


@pytest.mark.parametrize("added", ["\u00a0", "\u3000", "\u2003"])
def test_credentials_are_compared_exactly(added: str) -> None:
    """A bearer token, basic credentials or an HMAC signature with a Unicode space after it (which
    ``str.strip`` drops; aiohttp keeps it, having dropped only spaces and tabs) is a wrong one."""
    bearer = IngestAuthSpec.model_validate({"bearerToken": "s3cret-bearer-token"})
    user_pass = IngestAuthSpec.model_validate({"basic": {"username": "am", "password": "pw-123456"}})
    digest = "sha256=" + hmac.new(b"k3y-value", b"{}", hashlib.sha256).hexdigest()
    assert (True, True, True) == (
        credentials_ok(bearer, "Bearer s3cret-bearer-token"),
        credentials_ok(user_pass, basic("am", "pw-123456")),
        signature_ok("k3y-value", b"{}", digest),
    )
    assert (False, False, False) == (
        credentials_ok(bearer, "Bearer s3cret-bearer-token" + added),
        credentials_ok(user_pass, basic("am", "pw-123456") + added),
        signature_ok("k3y-value", b"{}", digest + added),
    )


POLLED = """\
id: polled
strategy: http-poll
endpoint: http://127.0.0.1:9/
intervalMs: 3600000
deliveryTargets: [console]
"""
PROBES = [
    {},
    {"Authorization": "Bearer s3cret-bearer-token-guess"},
    {"Authorization": basic("alertmanager", "guess")},
    {"X-Sentinel-Signature": "sha256=" + "0" * 64},
]


async def test_without_credentials_unknown_other_and_disabled_ids_look_alike(start_service: Starter) -> None:
    """A push without the right credentials gets one 404 (status and body) whether the id is unknown,
    a watcher of another strategy or a disabled webhook watcher; enabled webhook watchers with a
    secret, a bearer token or basic credentials answer 401 (SPEC §3); nothing is stored. Only the
    right credentials learn that a watcher is disabled."""
    signed_hook = GITHUB.replace("id: gh", "id: signed").replace(
        "X-Hub-Signature-256", "X-Sentinel-Signature"
    )
    disabled = BEARER.replace("id: hook", "id: off") + "enabled: false\n"
    service = await start_service(
        watchers={
            "p.yaml": POLLED,
            "b.yaml": BEARER,
            "a.yaml": BASIC.replace("id: hook", "id: basic"),
            "s.yaml": signed_hook,
            "o.yaml": disabled,
        }
    )

    async def answers(watcher_id: str) -> set[tuple[int, str]]:
        seen = set()
        for probe in PROBES:
            status, answer = await call(
                service, "POST", f"/hooks/ingest/{watcher_id}", body={"x": 1}, headers={**JSON, **probe}
            )
            text = json.dumps(answer, sort_keys=True).replace(repr(watcher_id), "'<id>'")
            seen.add((status, text))
        return seen

    hidden = [await answers(watcher_id) for watcher_id in ("nope", "polled", "off")]
    refused = [await answers(watcher_id) for watcher_id in ("hook", "basic", "signed")]
    [(status, answer)] = set().union(*hidden)
    assert (404, "not_found") == (status, json.loads(answer)["error"]["code"])
    [(status, answer)] = set().union(*refused)
    assert (401, "unauthorized") == (status, json.loads(answer)["error"]["code"])
    assert all([await last_observation(service.store, w) is None for w in ("hook", "basic", "signed", "off")])
    proven = {**JSON, "Authorization": "Bearer s3cret-bearer-token"}
    assert 409 == (await call(service, "POST", "/hooks/ingest/off", body={"x": 1}, headers=proven))[0]
