"""Webhook watcher keys of SPEC.md §16: format, auth, includeHeaders, and auth off loopback."""

from __future__ import annotations

import pytest

from sentinel_hooks.config.ingest import IngestAuthSpec
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.config.watcher import WebhookWatcher
from sentinel_hooks.errors import ConfigError, ConfigIssue
from tests.conftest import BASE_CONFIG, Writer

HOOK = """\
id: hook
strategy: webhook
deliveryTargets: [oncall]
"""
OFF_LOOPBACK = BASE_CONFIG + "server: {host: 0.0.0.0, apiToken: a-long-enough-api-token}\n"


def loaded_hook(project: Writer, extra: str = "", config: str = BASE_CONFIG, **env: str) -> WebhookWatcher:
    loaded = load_config(project(config, watchers__h_yaml=HOOK + extra), environ=env)
    spec = loaded.watchers[0].spec
    assert isinstance(spec, WebhookWatcher)
    return spec


def issues(project: Writer, extra: str = "", config: str = BASE_CONFIG, **env: str) -> list[ConfigIssue]:
    with pytest.raises(ConfigError) as caught:
        load_config(project(config, watchers__h_yaml=HOOK + extra), environ=env)
    return caught.value.issues


def test_defaults_are_json_and_no_auth(project: Writer) -> None:
    """Without the new keys a webhook watcher is what it was: json, no auth, no headers."""
    spec = loaded_hook(project)
    assert ("json", None, [], False, False) == (
        spec.format,
        spec.auth,
        spec.include_headers,
        spec.authenticated,
        spec.notifies_resolved,
    )


def test_bearer_and_basic_auth_load_from_the_environment(project: Writer) -> None:
    """auth: {bearerToken} and auth: {basic: {username, password}} take ${env:…} secrets."""
    bearer = loaded_hook(project, "auth: {bearerToken: '${env:TOKEN}'}\n", TOKEN="tok-123456")
    basic = loaded_hook(project, "auth: {basic: {username: am, password: '${env:PW}'}}\n", PW="pw-123456")
    assert isinstance(bearer.auth, IngestAuthSpec)
    assert isinstance(basic.auth, IngestAuthSpec)
    assert bearer.auth.bearer_token is not None
    assert basic.auth.basic is not None
    assert ("tok-123456", "am", "pw-123456", True, True) == (
        bearer.auth.bearer_token.get_secret_value(),
        basic.auth.basic.username,
        basic.auth.basic.password.get_secret_value(),
        bearer.authenticated,
        basic.authenticated,
    )


def test_alertmanager_format_notifies_resolved_unless_told_not_to(project: Writer) -> None:
    """notifyResolved defaults to true for format: alertmanager; written false, it is false."""
    default = loaded_hook(project, "format: alertmanager\n")
    quiet = loaded_hook(project, "format: alertmanager\nfire: {notifyResolved: false}\n")
    assert (True, False) == (default.notifies_resolved, quiet.notifies_resolved)


@pytest.mark.parametrize(
    ("extra", "key", "words"),
    [
        ("auth: bearer\n", "auth", "is not an auth"),
        ("auth: {}\n", "auth", "exactly one of bearerToken or basic"),
        ("auth: {bearerToken: a, basic: {username: u, password: p}}\n", "auth", "exactly one"),
        ("auth: {bearerToken: '  '}\n", "auth", "bearerToken is empty"),
        ("auth: {basic: {username: u}}\n", "auth.basic.password", "required"),
        ("auth: {token: x}\n", "auth.token", "unknown key"),
        ("secret: s3cr3t-value\nauth: none\n", "auth", "either secret"),
        ("format: xml\n", "format", "json"),
        ("includeHeaders: [Authorization]\n", "includeHeaders", "carries credentials"),
        ("includeHeaders: [X-GitHub-Event, x-github-event]\n", "includeHeaders", "listed twice"),
        ("includeHeaders: ['bad header']\n", "includeHeaders", "not an HTTP header name"),
        ("format: alertmanager\nfire: {trigger: level}\n", "fire.trigger", "format: alertmanager"),
        (
            "format: alertmanager\nfire: {repeatIntervalMs: 60000}\n",
            "fire.repeatIntervalMs",
            "repeat_interval",
        ),
    ],
)
def test_bad_webhook_keys_are_load_errors(project: Writer, extra: str, key: str, words: str) -> None:
    """Each wrong format, auth or includeHeaders is one file:line: key: message issue."""
    [issue] = issues(project, extra)
    assert (key, True, True) == (issue.key, words in issue.message, issue.line is not None), issue


def test_no_auth_off_loopback_is_refused_with_the_way_out(project: Writer) -> None:
    """Listening beyond loopback, a webhook watcher without secret or auth is a load error saying
    to add auth or write auth: none, at the watcher file's line."""
    [issue] = issues(project, config=OFF_LOOPBACK)
    assert (issue.file.endswith("watchers/h.yaml"), "auth") == (issue.file.endswith("h.yaml"), issue.key)
    assert all(words in issue.message for words in ("0.0.0.0", "auth: none", "bearerToken", "secret"))
    assert 1 == issue.line


@pytest.mark.parametrize(
    "extra", ["auth: none\n", "secret: s3cr3t-value\n", "auth: {bearerToken: t0ken-value}\n"]
)
def test_off_loopback_any_written_auth_is_accepted(project: Writer, extra: str) -> None:
    """A secret, an auth, or auth: none written out loads off loopback."""
    assert "hook" == loaded_hook(project, extra, config=OFF_LOOPBACK).id


def test_no_auth_on_loopback_is_accepted(project: Writer) -> None:
    """On 127.0.0.1 (the default) a webhook watcher may say nothing about auth."""
    assert loaded_hook(project).auth is None


def test_api_created_watcher_without_auth_is_refused_off_loopback(project: Writer) -> None:
    """The same check applies to watchers created through the API (validate_watcher)."""
    from sentinel_hooks.config.linemap import LineMap
    from sentinel_hooks.config.loader import validate_watcher

    config = load_config(project(OFF_LOOPBACK), environ={})
    data = {"id": "made", "strategy": "webhook", "deliveryTargets": ["oncall"]}
    spec, found = validate_watcher(
        data,
        display="body",
        lines=LineMap(),
        service=config.service,
        skills={},
        base_dir=config.base_dir,
    )
    assert (None, ["auth"]) == (spec, [issue.key for issue in found])


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ("auth: {basic: {username: am, password: '${env:PW:-}'}}\n", "auth.basic.password"),
        ("auth: {basic: {username: am, password: '${env:PW}'}}\n", "auth.basic.password"),
        ("auth: {basic: {username: '${env:USER:-}', password: pw-123456}}\n", "auth.basic.username"),
        ("secret: '${env:HOOK_SECRET:-}'\n", "secret"),
    ],
)
def test_an_empty_credential_is_a_load_error(project: Writer, extra: str, key: str) -> None:
    """An empty basic user name or password, or an empty HMAC secret (an unset ``${env:…:-}``, or a
    variable set to nothing), would let anyone in: refused at its key, saying how to give it."""
    [issue] = issues(project, extra, PW="")
    assert (key, True, True) == (issue.key, "is empty" in issue.message, "give " in issue.message), issue
