"""Delivery target definitions in sentinel.yaml (SPEC.md §6.2)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, SecretStr, model_validator

from sentinel_hooks.config.apprise_urls import AppriseUrlError, parse_apprise_url
from sentinel_hooks.config.base import Spec

PAGERDUTY_API_BASE = "https://events.pagerduty.com"


class TargetSpecBase(Spec):
    """What every target takes: ``followUps``, whether the agent's notifies after the page reach
    it (SPEC §6.4; default true, false for a target that cannot thread)."""

    follow_ups: bool | None = None

    def threads(self) -> bool:
        """Whether the target can show a follow-up as part of its page (most can)."""
        return True

    def takes_follow_ups(self) -> bool:
        """``followUps`` as written, else whether the target can thread."""
        return self.threads() if self.follow_ups is None else self.follow_ups


class SlackTargetSpec(TargetSpecBase):
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

    def threads(self) -> bool:
        """A bot token threads; an incoming webhook cannot."""
        return self.webhook_url is None

    def urls(self) -> list[str]:
        if self.webhook_url is not None:
            return [self.webhook_url.get_secret_value()]
        return [self.api_base or "https://slack.com/api"]


class WebhookTargetSpec(TargetSpecBase):
    """POST JSON to a URL, signed with HMAC-SHA256 when ``secret`` is set."""

    type: Literal["webhook"]
    url: str
    secret: SecretStr | None = None
    headers: dict[str, str] = Field(default_factory=dict)

    def urls(self) -> list[str]:
        return [self.url]


class ConsoleTargetSpec(TargetSpecBase):
    """Print to the service's standard output."""

    type: Literal["console"]

    def urls(self) -> list[str]:
        return []


class FileTargetSpec(TargetSpecBase):
    """Append JSON lines to a file (relative to the directory of sentinel.yaml)."""

    type: Literal["file"]
    path: str = Field(min_length=1)

    def urls(self) -> list[str]:
        return []


class PagerDutyTargetSpec(TargetSpecBase):
    """PagerDuty Events API v2: the agent's notify and the fallback trigger an event, keyed by
    the callback; the resolved message resolves it (SPEC.md §16)."""

    type: Literal["pagerduty"]
    routing_key: SecretStr = Field(min_length=1)
    api_base: str | None = None

    def enqueue_url(self) -> str:
        """Where events are POSTed: ``{apiBase}/v2/enqueue``."""
        return (self.api_base or PAGERDUTY_API_BASE).rstrip("/") + "/v2/enqueue"

    def urls(self) -> list[str]:
        return [self.enqueue_url()]


def _apprise_url(url: SecretStr) -> SecretStr:
    """``url`` when Apprise has a notifier for it (the error never quotes the URL)."""
    try:
        parse_apprise_url(url.get_secret_value())
    except AppriseUrlError as exc:
        raise ValueError(str(exc)) from None
    return url


AppriseUrlText = Annotated[SecretStr, AfterValidator(_apprise_url)]


class AppriseTargetSpec(TargetSpecBase):
    """Any service the Apprise library supports, by URL (``mailto://``, ``tgram://``, ``ntfy://`` …).

    The URLs are secrets (they hold tokens and passwords); their hosts are checked against
    allowedHosts by ``config.crosscheck`` with ``config.apprise_urls.reached_hosts``."""

    type: Literal["apprise"]
    service_urls: list[AppriseUrlText] = Field(alias="urls", min_length=1)

    def threads(self) -> bool:
        """Apprise's services have no threads: follow-ups only with ``followUps: true``."""
        return False

    def apprise_urls(self) -> list[str]:
        """The URLs as written (secrets: never show them, ``parse_apprise_url(u).shown`` instead)."""
        return [url.get_secret_value() for url in self.service_urls]

    def urls(self) -> list[str]:
        return []  # not HTTP URLs: crosscheck checks the hosts Apprise reaches instead


TargetSpec = Annotated[
    SlackTargetSpec
    | WebhookTargetSpec
    | ConsoleTargetSpec
    | FileTargetSpec
    | PagerDutyTargetSpec
    | AppriseTargetSpec,
    Field(discriminator="type"),
]
