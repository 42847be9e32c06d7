"""Who may act from Slack buttons, and the Slack app's signing secret (SPEC.md §21).

Kept apart from service.py so the Slack interaction route and the Slack target read one small
module; the signing secret is a ``SecretStr`` so it is redacted in every dump and error.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator

from sentinel_hooks.config.base import Name, Spec

Role = Literal["viewer", "operator", "admin"]


class PersonSpec(Spec):
    """One person: their Slack user id and the role their clicks carry."""

    slack: str = Field(pattern=r"^[UW][A-Z0-9]{2,}$")
    role: Role


class SlackSpec(Spec):
    """The Slack app: with a signing secret, bot-token Slack pages carry buttons."""

    signing_secret: SecretStr | None = None

    @field_validator("signing_secret")
    @classmethod
    def _secret_given(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().strip():
            raise ValueError("slack.signingSecret is empty: set it or remove the key")
        return value


def check_unique_slack_ids(people: dict[Name, PersonSpec]) -> dict[Name, PersonSpec]:
    """``people`` when no Slack user id belongs to two names (a click must name one person)."""
    owner: dict[str, str] = {}
    for name, person in people.items():
        if person.slack in owner:
            raise ValueError(
                f"Slack id {person.slack!r} is given to both {owner[person.slack]!r} and {name!r}"
            )
        owner[person.slack] = name
    return people


def person_for_slack(people: dict[str, PersonSpec], slack_id: str) -> tuple[str, PersonSpec] | None:
    """The person name and spec behind a Slack user id, or None when nobody is mapped to it."""
    for name, person in people.items():
        if person.slack == slack_id:
            return name, person
    return None
