"""How a webhook watcher's pushes prove themselves, and which request headers it keeps (SPEC.md §16).

The keys ``auth`` and ``includeHeaders`` of a ``webhook`` watcher (``config.watcher.WebhookWatcher``);
``api.ingest_auth`` checks a request against them.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Discriminator, SecretStr, Tag, field_validator, model_validator

from sentinel_hooks.config.base import Spec
from sentinel_hooks.config.secrets import CREDENTIAL_HEADERS

HEADER_NAME = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,256}$"  # an HTTP field name (RFC 9110 token)


class BasicAuthSpec(Spec):
    """HTTP basic credentials a webhook source sends (what Alertmanager's ``basic_auth`` writes).

    Neither part may be empty: an unset ``${env:PW:-}`` gives an empty password, and an empty
    password lets in anyone who knows (or guesses) the user name."""

    username: str
    password: SecretStr

    @field_validator("username")
    @classmethod
    def _username_given(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is empty; give the user name the source sends (e.g. alertmanager)")
        return value

    @field_validator("password")
    @classmethod
    def _password_given(cls, value: SecretStr) -> SecretStr:
        if not value.get_secret_value().strip():
            raise ValueError(
                "is empty (an unset ${env:…:-} default?): anyone who knows the user name would get "
                "in; give it from the environment, e.g. ${env:INGEST_PASSWORD}"
            )
        return value


class IngestAuthSpec(Spec):
    """How a webhook source proves itself without signing: a bearer token or basic credentials."""

    bearer_token: SecretStr | None = None
    basic: BasicAuthSpec | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> IngestAuthSpec:
        if (self.bearer_token is None) == (self.basic is None):
            raise ValueError(
                "give exactly one of bearerToken or basic: {username, password} "
                "(or write `auth: none` to accept unauthenticated pushes)"
            )
        if self.bearer_token is not None and not self.bearer_token.get_secret_value().strip():
            raise ValueError("bearerToken is empty; give it from the environment, e.g. ${env:INGEST_TOKEN}")
        return self


def _auth_kind(value: Any) -> str:
    """Which branch of ``IngestAuth`` validates ``value``: text is ``none`` (or a wrong word)."""
    return "none" if isinstance(value, str) else "credentials"


IngestAuth = Annotated[
    Annotated[IngestAuthSpec, Tag("credentials")] | Annotated[Literal["none"], Tag("none")],
    Discriminator(_auth_kind),
]
"""``auth``: credentials, or ``none`` written out (one branch validated, so errors name one)."""


def check_include_headers(names: list[str]) -> list[str]:
    """``includeHeaders``: HTTP header names, none carrying credentials, none twice (any case)."""
    seen: set[str] = set()
    for name in names:
        if re.fullmatch(HEADER_NAME, name) is None:
            raise ValueError(
                f"{name!r} is not an HTTP header name (letters, digits and !#$%&'*+.^_`|~- only)"
            )
        if name.lower() in CREDENTIAL_HEADERS:
            raise ValueError(
                f"header {name!r} carries credentials and is never added to observations "
                "(they are stored, shown and given to the model)"
            )
        if name.lower() in seen:
            raise ValueError(f"header {name!r} is listed twice (header names ignore case)")
        seen.add(name.lower())
    return names
