"""The pagerduty and apprise targets in sentinel.yaml (SPEC.md §16): what loads, and the
``file:line: key: message`` errors for what does not — never quoting a URL's or key's secret."""

from __future__ import annotations

import string
from pathlib import Path

import apprise
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sentinel_hooks.config.apprise_urls import hidden_parts, parse_apprise_url, transport
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.targets import AppriseTargetSpec, PagerDutyTargetSpec
from sentinel_hooks.errors import ConfigError, ConfigIssue
from tests.conftest import Writer

TELEGRAM = "tgram://123456789:AAHsecretBotToken/4242"


def issues_of(config: Path, env: dict[str, str] | None = None) -> list[ConfigIssue]:
    with pytest.raises(ConfigError) as caught:
        load_config(config, environ=env or {})
    return caught.value.issues


def apprise_config(*urls: str, allowed: str = '["127.0.0.1"]') -> str:
    listed = "\n".join(f'      - "{url}"' for url in urls)
    return f"allowedHosts: {allowed}\ntargets:\n  chat:\n    type: apprise\n    urls:\n{listed}\n"


def test_a_pagerduty_target_loads_with_its_key_from_the_environment(project: Writer) -> None:
    """``routingKey: ${env:…}`` loads; apiBase defaults to PagerDuty's Events API."""
    config = "allowedHosts: [events.pagerduty.com]\n"
    config += 'targets: {pd: {type: pagerduty, routingKey: "${env:PD_KEY}"}}\n'
    loaded = load_config(project(config), environ={"PD_KEY": "k" * 32})
    target = loaded.service.targets["pd"]
    assert isinstance(target, PagerDutyTargetSpec)
    assert ("k" * 32, "https://events.pagerduty.com/v2/enqueue") == (
        target.routing_key.get_secret_value(),
        target.enqueue_url(),
    )


def test_pagerduty_host_is_checked_against_allowed_hosts(project: Writer) -> None:
    """events.pagerduty.com not in allowedHosts: an error at the target's line saying what to add."""
    config = "allowedHosts: []\ntargets:\n  pd: {type: pagerduty, routingKey: abcd1234}\n"
    [issue] = issues_of(project(config))
    assert (3, "targets.pd.apiBase") == (issue.line, issue.key)
    assert "add 'events.pagerduty.com' to allowedHosts" in issue.message
    assert "abcd1234" not in issue.message


def test_pagerduty_needs_a_routing_key(project: Writer) -> None:
    """No routingKey: the usual missing-key error."""
    [issue] = issues_of(project("targets:\n  pd: {type: pagerduty}\n"))
    assert "routingKey" in issue.key + issue.message


def test_an_apprise_target_loads(project: Writer) -> None:
    """URLs whose hosts are allowed load, kept as secrets."""
    loaded = load_config(project(apprise_config("json://127.0.0.1:8080/hook")), environ={})
    target = loaded.service.targets["chat"]
    assert isinstance(target, AppriseTargetSpec)
    assert ["json://127.0.0.1:8080/hook"] == target.apprise_urls()
    assert "8080" not in repr(target)


def test_a_url_apprise_does_not_know_is_an_error_without_the_url(project: Writer) -> None:
    """An unknown scheme: error at that list item, naming the scheme only."""
    [issue] = issues_of(project(apprise_config("json://127.0.0.1/x", "nosuch://user:hunter2pass@host/")))
    assert (7, "targets.chat.urls[1]") == (issue.line, issue.key)
    assert "nosuch://" in issue.message
    assert "hunter2pass" not in issue.message


def test_a_telegram_url_needs_telegrams_api_host(project: Writer) -> None:
    """tgram:// reaches api.telegram.org (not its "host", which is the bot token): that host must be
    allowed, and the error shows Apprise's privacy form of the URL, never the token."""
    [issue] = issues_of(project(apprise_config(TELEGRAM)))
    assert (6, "targets.chat.urls[0]") == (issue.line, issue.key)
    assert "add 'api.telegram.org' to allowedHosts" in issue.message
    assert "AAHsecretBotToken" not in issue.message
    assert "123456789" not in issue.message
    assert load_config(project(apprise_config(TELEGRAM, allowed="[api.telegram.org]")), environ={})


def test_a_mail_url_needs_its_smtp_server(project: Writer) -> None:
    """mailto:// reaches the SMTP server Apprise picks for the address (smtp.gmail.com for gmail.com)."""
    [issue] = issues_of(project(apprise_config("mailto://me:app-password@gmail.com")))
    assert "'smtp.gmail.com'" in issue.message
    assert "app-password" not in issue.message


def test_a_url_from_the_environment_is_redacted_in_errors(project: Writer) -> None:
    """A whole URL from ``${env:…}``: its host error does not show it."""
    config = apprise_config("${env:CHAT_URL}")
    [issue] = issues_of(project(config), env={"CHAT_URL": "ntfy://my-secret-topic-name"})
    assert "ntfy.sh" in issue.message
    assert "my-secret-topic-name" not in issue.message


@pytest.mark.parametrize(
    ("url", "hosts"),
    [
        ("json://127.0.0.1:8080/hook", ("127.0.0.1",)),
        ("ntfy://ntfy.example.com/topic", ("ntfy.example.com",)),
        ("ntfy://topic", ("ntfy.sh",)),
        (TELEGRAM, ("api.telegram.org",)),
        ("discord://1234/abcdef", ("discord.com",)),
        ("mailto://bob:pw12@mail.example.org?smtp=smtp.example.org", ("smtp.example.org",)),
    ],
)
def test_reached_hosts_come_from_apprise(url: str, hosts: tuple[str, ...]) -> None:
    """The hosts a URL reaches: the server it names, the SMTP server, or the service's fixed API host."""
    assert hosts == parse_apprise_url(url).hosts


def test_hidden_parts_are_what_the_privacy_form_hides() -> None:
    """Secrets of a URL: its parts (as written and decoded) missing from Apprise's privacy form."""
    parsed = parse_apprise_url("mailto://bob:p%40ssword@mail.example.org")
    assert {"p%40ssword", "p@ssword"} == set(parsed.secrets)
    assert () == hidden_parts("json://127.0.0.1/x", "json://127.0.0.1/x?method=POST")


def docs_example(section: str) -> str:
    """The first YAML block under ``## {section}`` in docs/integrations.md."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text(encoding="utf-8")
    after = text.split(f"## {section}\n", 1)[1]
    return after.split("```yaml\n", 1)[1].split("```", 1)[0]


@pytest.mark.parametrize("section", ["PagerDuty", "Apprise"])
def test_the_documented_examples_load(project: Writer, section: str) -> None:
    """The copy-paste configs of docs/integrations.md load as written (with their variables set)."""
    names = ("PD_ROUTING_KEY", "SMTP_USER", "SMTP_PASSWORD", "TG_CHAT_ID", "NTFY_TOPIC")
    env = dict.fromkeys(names, "Env1Value2Long3")
    env["TG_BOT_TOKEN"] = "123456789:AAHsecretBotToken"
    env["TEAMS_WORKFLOW_URL"] = "workflows://prod-01.westus.logic.azure.com:443/abc123/sig456"
    loaded = load_config(project(docs_example(section)), environ=env)
    assert loaded.service.targets


TOKENS = st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=8, max_size=30)
URL_FORMS = [
    "tgram://123456789:{token}/4242",
    "json://bob:{token}@127.0.0.1:8080/hooks/{token}",
    "ntfy://{token}",
    "ntfy://ntfy.example.com/{token}",
    "discord://98765432/{token}",
    "mailto://bob:{token}@mail.example.org",
    "workflows://prod-01.westus.logic.azure.com:443/{token}/{token}",
]


@settings(max_examples=40, deadline=None)
@given(form=st.sampled_from(URL_FORMS), token=TOKENS)
def test_no_token_survives_in_the_shown_form(form: str, token: str) -> None:
    """Whatever the token, the shown form of a URL never holds it, and its secrets mask it in any
    text Apprise might write about the URL."""
    assume(token.lower() not in form.lower() and not token.isdigit())
    url = form.format(token=token)
    parsed = parse_apprise_url(url)
    assert token not in parsed.shown
    assert token not in Redactor(parsed.secrets).text(f"Failed to send to {url}: {token}")


def test_a_udp_syslog_url_is_refused_at_load(project: Writer) -> None:
    """rsyslog:// sends UDP datagrams, where the host policy is not applied: even with its host in
    allowedHosts the URL is a load error at its item, naming the scheme and the way out."""
    [issue] = issues_of(project(apprise_config("rsyslog://localhost:5140", allowed="[localhost]")))
    assert (6, "targets.chat.urls[0]") == (issue.line, issue.key)
    assert "(rsyslog://) does not send over HTTP(S), SMTP or TCP" in issue.message
    assert "allowPrivateNetworks" in issue.message


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("json://127.0.0.1/x", "HTTP(S)"),
        ("discord://1234/abcdef", "HTTP(S)"),
        ("mailto://bob:pw12@mail.example.org", "SMTP"),
        ("irc://bot@irc.example.org/ops", "TCP"),
        ("rsyslog://127.0.0.1", None),
        ("syslog://", None),
    ],
)
def test_the_transport_of_a_notifier(url: str, expected: str | None) -> None:
    """HTTP(S), SMTP and Apprise's TCP clients go through the connection guard; syslog does not."""
    notifier = apprise.Apprise.instantiate(url)
    assert expected == transport(notifier)
