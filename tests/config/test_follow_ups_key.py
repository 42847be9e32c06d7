"""``followUps`` on a target (SPEC §6.4): whether the agent's notifies after the page reach it.
True by default, false for the targets that cannot thread (Apprise, incoming-webhook Slack)."""

from __future__ import annotations

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.errors import ConfigError
from tests.conftest import Writer

TARGETS = """\
allowedHosts: ["127.0.0.1", hooks.slack.com, slack.com]
targets:
  hook: {type: webhook, url: "http://127.0.0.1:9/in"}
  log: {type: file, path: out.jsonl}
  bot: {type: slack, token: xoxb-1, channel: "#ops"}
  incoming: {type: slack, webhookUrl: "https://hooks.slack.com/services/T/B/x"}
  chat: {type: apprise, urls: ["json://127.0.0.1:9/in"]}
  chatty: {type: apprise, urls: ["json://127.0.0.1:9/in"], followUps: true}
  quiet: {type: webhook, url: "http://127.0.0.1:9/in", followUps: false}
"""


def test_follow_ups_default_by_whether_the_target_threads(project: Writer) -> None:
    """Webhook, file and bot-token Slack take follow-ups; Apprise and incoming-webhook Slack only
    when ``followUps: true``; ``followUps: false`` turns them off anywhere."""
    targets = load_config(project(TARGETS), environ={}).service.targets
    taken = {name: spec.takes_follow_ups() for name, spec in targets.items()}
    assert {
        "hook": True,
        "log": True,
        "bot": True,
        "incoming": False,
        "chat": False,
        "chatty": True,
        "quiet": False,
    } == taken


def test_follow_ups_must_be_a_boolean(project: Writer) -> None:
    """``followUps: "yes"`` is not converted: ``file:line: key: message`` at the key."""
    config = 'targets:\n  log: {type: file, path: out.jsonl, followUps: "yes"}\n'
    with pytest.raises(ConfigError) as caught:
        load_config(project(config), environ={})
    [issue] = caught.value.issues
    assert (2, "targets.log.followUps", "expected true or false, got the text 'yes'") == (
        issue.line,
        issue.key,
        issue.message,
    )
