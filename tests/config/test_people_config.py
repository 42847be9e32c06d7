"""sentinel.yaml ``people`` and ``slack`` (SPEC §21): roles checked, Slack ids unique, secret hidden."""

from __future__ import annotations

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.config.people import person_for_slack
from sentinel_hooks.errors import ConfigError
from tests.conftest import Writer

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


def test_people_and_signing_secret_load(project: Writer) -> None:
    """A person maps to their role; the secret comes from the environment and is a SecretStr."""
    config = (
        "people:\n  alice: {slack: U012ABCDEF, role: operator}\n"
        'slack: {signingSecret: "${env:SLACK_SIGNING_SECRET}"}\n'
    )
    service = load_config(project(config), environ={"SLACK_SIGNING_SECRET": SECRET}).service
    found = person_for_slack(service.people, "U012ABCDEF")
    assert found is not None
    assert ("alice", "operator") == (found[0], found[1].role)
    assert person_for_slack(service.people, "U999") is None
    assert service.slack.signing_secret is not None
    assert SECRET == service.slack.signing_secret.get_secret_value()
    assert SECRET not in repr(service)
    assert SECRET not in service.model_dump_json()


def test_unknown_role_is_an_error_at_its_line(project: Writer) -> None:
    """A role that is not viewer, operator or admin names the file line."""
    with pytest.raises(ConfigError) as caught:
        load_config(project("people:\n  alice: {slack: U012ABCDEF, role: root}\n"), environ={})
    [issue] = caught.value.issues
    assert 2 == issue.line
    assert "people.alice.role" == issue.key


def test_duplicate_slack_id_is_an_error(project: Writer) -> None:
    """Two names for one Slack id would make a click ambiguous."""
    config = (
        "people:\n  alice: {slack: U012ABCDEF, role: operator}\n  bob: {slack: U012ABCDEF, role: admin}\n"
    )
    with pytest.raises(ConfigError, match="U012ABCDEF"):
        load_config(project(config), environ={})


def test_bad_secret_value_is_never_shown(project: Writer) -> None:
    """A wrongly typed signing secret is refused without echoing it."""
    with pytest.raises(ConfigError) as caught:
        load_config(project("slack: {signingSecret: 12345678901234567}\n"), environ={})
    assert "12345678901234567" not in str(caught.value)
