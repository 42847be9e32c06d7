"""Every problem is reported at its own line and key, together with the others."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.errors import ConfigError, ConfigIssue
from tests.conftest import BASE_CONFIG, Writer

WEBHOOK = """\
id: hook
strategy: webhook
deliveryTargets: [oncall]
"""


def issues_of(config: Path, env: dict[str, str] | None = None) -> list[ConfigIssue]:
    with pytest.raises(ConfigError) as caught:
        load_config(config, environ=env or {})
    return caught.value.issues


def test_every_template_error_is_reported(project: Writer) -> None:
    """Three bad templates, and two bad values in one payloadTemplate: four errors, each at its key."""
    text = WEBHOOK + (
        "fire:\n"
        "  messageTemplate: '{{ payload.x '\n"
        "  dedupeKeyTemplate: '{{ nope.y }}'\n"
        "  payloadTemplate:\n"
        "    a: '{{ bad.z }}'\n"
        "    ok: '${payload.ok}'\n"
        "    c: '{% if %}'\n"
    )
    found = issues_of(project(watchers__w_yaml=text))
    assert [
        (5, "fire.messageTemplate"),
        (6, "fire.dedupeKeyTemplate"),
        (8, "fire.payloadTemplate.a"),
        (10, "fire.payloadTemplate.c"),
    ] == [(i.line, i.key) for i in found]
    assert [False] * 4 == [i.message.startswith("fire.") for i in found], found


def test_template_errors_are_reported_with_other_errors(project: Writer) -> None:
    """A bad template does not hide a bad enum in the same block, nor the reverse."""
    text = WEBHOOK + "fire:\n  priority: urgent\n  contextTemplate: {x: '{{ nope }}', y: ['{{ bad }}']}\n"
    found = issues_of(project(watchers__w_yaml=text))
    assert ["fire.priority", "fire.contextTemplate.x", "fire.contextTemplate.y[0]"] == [i.key for i in found]


def test_host_without_token_is_reported_with_other_errors_at_its_line(project: Writer) -> None:
    """`host: 0.0.0.0` without apiToken is one error among the others, at the host's line."""
    config = BASE_CONFIG + "hookConcurrency: many\nserver:\n  port: 8765\n  host: 0.0.0.0\n"
    found = issues_of(project(config, watchers__w_yaml=WEBHOOK + "enabled: 'no'\n"))
    assert [
        ("sentinel.yaml", 7, "hookConcurrency"),
        ("sentinel.yaml", 10, "server.host"),
        ("w.yaml", 4, "enabled"),
    ] == [(Path(i.file).name, i.line, i.key) for i in found]
    assert "server.apiToken or server.tokens is required" in found[1].message


@pytest.mark.parametrize(
    ("text", "line", "hint"),
    [
        ("id: w1\nstrategy: webhook\n  enabled: true\n", 3, "check the indentation of line 3"),
        ("fire:\n    eventName: x\n  priority: high\n", 3, "check the indentation of line 3"),
        ("conditions:\n  - path: a\n    op: eq\n   value: 1\n", 4, "check the indentation of line 4"),
        ("id: w1\n\tstrategy: webhook\n", 2, "indent line 2 with spaces"),
        ("id: w1\nstrategy webhook\nenabled: true\n", 3, "line 2"),
        ("id: 'w1\nstrategy: webhook\n", 3, "line 1"),
    ],
)
def test_yaml_syntax_error_gets_a_hint(project: Writer, text: str, line: int, hint: str) -> None:
    """An indentation mistake names the line to look at, not only ruamel's wording."""
    found = issues_of(project(watchers__w_yaml=text))
    assert [(line, True)] == [(i.line, hint in i.message) for i in found], found
