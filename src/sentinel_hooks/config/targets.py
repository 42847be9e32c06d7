"""Delivery target definitions in sentinel.yaml (SPEC.md §6.2)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, SecretStr, model_validator

from sentinel_hooks.config.base import Spec


class SlackTargetSpec(Spec):
    """Slack: an incoming webhook, or a bot token and a channel (chat.postMessage)."""

    type: Literal["slack"]
    webhook_url: SecretStr | None = None
    token: SecretStr | None = None
    channel: str | None = None
    api_base: str | None = None

    @model_validator(mode="after")
    def _one_way_to_post(self) -> SlackTargetSpec:
        if self.webhook_url is None and self.token is None:
            raise ValueError("a slack target needs webhookUrl, or token and channel")
        if self.webhook_url is not None and self.token is not None:
            raise ValueError("a slack target takes webhookUrl or token, not both")
        if self.token is not None and not self.channel:
            raise ValueError("a slack target with a token needs a channel (e.g. channel: '#ops')")
        return self

    def urls(self) -> list[str]:
        if self.webhook_url is not None:
            return [self.webhook_url.get_secret_value()]
        return [self.api_base or "https://slack.com/api"]


class WebhookTargetSpec(Spec):
    """POST JSON to a URL, signed with HMAC-SHA256 when ``secret`` is set."""

    type: Literal["webhook"]
    url: str
    secret: SecretStr | None = None
    headers: dict[str, str] = Field(default_factory=dict)

    def urls(self) -> list[str]:
        return [self.url]


class ConsoleTargetSpec(Spec):
    """Print to the service's standard output."""

    type: Literal["console"]

    def urls(self) -> list[str]:
        return []


class FileTargetSpec(Spec):
    """Append JSON lines to a file (relative to the directory of sentinel.yaml)."""

    type: Literal["file"]
    path: str = Field(min_length=1)

    def urls(self) -> list[str]:
        return []


TargetSpec = Annotated[
    SlackTargetSpec | WebhookTargetSpec | ConsoleTargetSpec | FileTargetSpec,
    Field(discriminator="type"),
]
