"""``server.tokens`` (SPEC.md §21): named API tokens, each with a role.

Checked here: every token is at least 16 characters, and names and tokens are distinct (two people
with one token could not be told apart). ``server.apiToken`` is one more token, ``admin`` (see
``access_tokens``).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import SecretStr, field_validator

from sentinel_hooks.config.base import Name, Spec
from sentinel_hooks.core.roles import Role

MIN_TOKEN_CHARS = 16
TOKEN_HINT = "(e.g. `openssl rand -hex 24`, given as ${env:SENTINEL_API_TOKEN})"
API_TOKEN_NAME = "admin"


def check_length(token: SecretStr) -> SecretStr:
    """``token`` when it is long enough to guess in no lifetime; the error never shows it."""
    length = len(token.get_secret_value())
    if length < MIN_TOKEN_CHARS:
        raise ValueError(
            f"the token has {length} character(s); use at least {MIN_TOKEN_CHARS} characters {TOKEN_HINT}"
        )
    return token


class TokenSpec(Spec):
    """One named token: its ``name`` is the actor of the changes made with it."""

    name: Name
    token: SecretStr
    role: Role

    @field_validator("token")
    @classmethod
    def _long_enough(cls, token: SecretStr) -> SecretStr:
        return check_length(token)


def check_distinct(tokens: Sequence[TokenSpec], api_token: SecretStr | None = None) -> None:
    """ValueError when two tokens share a name or a secret (``apiToken`` counts as ``admin``)."""
    names: set[str] = set()
    secrets: set[str] = set() if api_token is None else {api_token.get_secret_value()}
    if api_token is not None:
        names.add(API_TOKEN_NAME)
    for index, spec in enumerate(tokens):
        if spec.name in names:
            raise ValueError(
                f"tokens[{index}]: the name {spec.name!r} is used twice; give each token its own name"
            )
        secret = spec.token.get_secret_value()
        if secret in secrets:
            raise ValueError(
                f"tokens[{index}] ({spec.name}): its token is also another's; give each its own {TOKEN_HINT}"
            )
        names.add(spec.name)
        secrets.add(secret)
