"""Wrong types are load errors, never converted; a whole `${env:…}` value takes the key's type."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.errors import ConfigError, ConfigIssue
from tests.conftest import BASE_CONFIG, Writer

WATCHER = """\
id: price
strategy: http-poll
endpoint: https://api.example.com/price
intervalMs: 15000
enabled: true
cooldownMs: 0
deliveryTargets: [oncall]
"""


def issues_of(config: Path, env: dict[str, str] | None = None) -> list[ConfigIssue]:
    with pytest.raises(ConfigError) as caught:
        load_config(config, environ=env or {})
    return caught.value.issues


@pytest.mark.parametrize(
    ("before", "after", "line", "key", "expected"),
    [
        ("enabled: true", 'enabled: "no"', 5, "enabled", "expected true or false, got the text 'no'"),
        ("enabled: true", "enabled: 1", 5, "enabled", "expected true or false, got the number 1"),
        (
            "intervalMs: 15000",
            'intervalMs: "2000"',
            4,
            "intervalMs",
            "expected a whole number, got the text '2000' (write it without quotes: 2000)",
        ),
        (
            "intervalMs: 15000",
            "intervalMs: 2000.0",
            4,
            "intervalMs",
            "expected a whole number, got the number 2000.0",
        ),
        (
            "cooldownMs: 0",
            "cooldownMs: false",
            6,
            "cooldownMs",
            "expected a whole number, got the boolean false",
        ),
        (
            "[oncall]",
            "[1]",
            7,
            "deliveryTargets[0]",
            "expected text, got the number 1 (quote it if you mean the text: '1')",
        ),
    ],
)
def test_wrong_type_in_a_watcher_is_refused(
    project: Writer, before: str, after: str, line: int, key: str, expected: str
) -> None:
    """A value of the wrong type is an error at its line and key, never converted."""
    found = issues_of(project(watchers__w_yaml=WATCHER.replace(before, after)))
    assert [(line, key, expected)] == [(i.line, i.key, i.message) for i in found]


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('hookConcurrency: "4"\n', "hookConcurrency"),
        ("server: {port: '8765'}\n", "server.port"),
        ("allowPrivateNetworks: yes\n", "allowPrivateNetworks"),
        ("delivery: {maxAttempts: true}\n", "delivery.maxAttempts"),
        ("models: {m: {type: openai, model: x, temperature: '0.5'}}\n", "models.m.temperature"),
        ("limits: {minIntervalMs: '1000'}\n", "limits.minIntervalMs"),
        ("actionPolicy: {loopGuard: 3.0}\n", "actionPolicy.loopGuard"),
    ],
)
def test_wrong_type_in_sentinel_yaml_is_refused(project: Writer, text: str, key: str) -> None:
    """sentinel.yaml is as strict as watcher files."""
    found = issues_of(project(text))
    assert [key] == [i.key for i in found], found


def test_whole_env_reference_takes_the_type_of_the_key(project: Writer) -> None:
    """`intervalMs: ${env:EVERY}` is the number in $EVERY; `enabled: ${env:ON}` the boolean."""
    text = WATCHER.replace("intervalMs: 15000", "intervalMs: ${env:EVERY}")
    text = text.replace("enabled: true", "enabled: ${env:ON}").replace(
        "cooldownMs: 0", "cooldownMs: ${env:C:-0}"
    )
    config = BASE_CONFIG + "server: {port: '${env:PORT}'}\n"
    env = {"EVERY": "20000", "ON": "false", "PORT": "9876"}
    loaded = load_config(project(config, watchers__w_yaml=text), environ=env)
    spec = loaded.watchers[0].spec
    assert (20000, False, 0, 9876) == (
        spec.interval_ms,  # type: ignore[union-attr]
        spec.enabled,
        spec.cooldown_ms,
        loaded.service.server.port,
    )


def test_env_text_stays_a_string_where_a_string_is_expected(project: Writer) -> None:
    """A numeric-looking value from the environment is kept as text for a text key."""
    config = BASE_CONFIG + "server: {apiToken: '${env:TOKEN}'}\nhookSessionGroup: '${env:GROUP}'\n"
    env = {"TOKEN": "1234567890123456789", "GROUP": "42"}
    service = load_config(project(config), environ=env).service
    assert service.server.api_token is not None
    assert ("1234567890123456789", "42") == (
        service.server.api_token.get_secret_value(),
        service.hook_session_group,
    )


@pytest.mark.parametrize(
    ("value", "env"),
    [
        ("'${env:EVERY}'", {"EVERY": "soon"}),
        ("'${env:EVERY}0'", {"EVERY": "2000"}),
        ("'${env:EVERY}'", {"EVERY": "true"}),
    ],
)
def test_env_value_of_the_wrong_type_is_refused(project: Writer, value: str, env: dict[str, str]) -> None:
    """Text that is not a number, or a reference with text around it, is not a number."""
    text = WATCHER.replace("intervalMs: 15000", f"intervalMs: {value}")
    found = issues_of(project(watchers__w_yaml=text), env)
    assert [(4, "intervalMs", True)] == [
        (i.line, i.key, "expected a whole number" in i.message) for i in found
    ]


def test_env_boolean_follows_yaml_12(project: Writer) -> None:
    """`yes` from the environment is not a boolean, as it is not in a YAML 1.2 file."""
    text = WATCHER.replace("enabled: true", "enabled: ${env:ON}")
    found = issues_of(project(watchers__w_yaml=text), {"ON": "yes"})
    assert [(5, "enabled")] == [(i.line, i.key) for i in found]


@pytest.mark.parametrize("token", ["zq", "short-token-15c"])
def test_short_api_token_is_refused_whatever_the_host(project: Writer, token: str) -> None:
    """An apiToken under 16 characters is an error at its line; the token is not shown."""
    config = BASE_CONFIG + f"server:\n  host: 127.0.0.1\n  apiToken: {token}\n"
    found = issues_of(project(config))
    assert [(9, "server.apiToken")] == [(i.line, i.key) for i in found]
    assert "at least 16 characters" in found[0].message
    assert token not in found[0].message


def test_short_api_token_from_the_environment_is_refused(project: Writer) -> None:
    """The length check applies to a token taken from the environment too."""
    config = BASE_CONFIG + "server: {host: 0.0.0.0, apiToken: '${env:TOKEN}'}\n"
    found = issues_of(project(config), {"TOKEN": "abc"})
    assert [("server.apiToken", "at least 16 characters")] == [
        (i.key, "at least 16 characters" if "at least 16 characters" in i.message else i.message)
        for i in found
    ]


def test_sixteen_character_token_is_accepted(project: Writer) -> None:
    """16 characters is enough, on any host."""
    config = BASE_CONFIG + "server: {host: 0.0.0.0, apiToken: 0123456789abcdef}\n"
    token = load_config(project(config), environ={}).service.server.api_token
    assert token is not None
    assert "0123456789abcdef" == token.get_secret_value()


def test_a_union_key_lists_every_type_it_takes(project: Writer) -> None:
    """A wrong type for `body` (text, mapping or list) is one error naming all three."""
    text = WATCHER + "body: 5\n"
    found = issues_of(project(watchers__w_yaml=text))
    assert [
        (
            8,
            "body",
            "expected text, a mapping of keys or a list, got the number 5 "
            "(quote it if you mean the text: '5')",
        )
    ] == [(i.line, i.key, i.message) for i in found]


def test_a_secret_of_the_wrong_type_is_not_shown(project: Writer) -> None:
    """An apiToken written as a number is refused without printing it."""
    found = issues_of(project("server: {apiToken: 12345678901234567890}\n"))
    assert [("server.apiToken", "expected text")] == [(i.key, i.message) for i in found]
