"""escalationPolicies, defaultEscalationPolicy, a watcher's escalationPolicy and server.publicUrl."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.errors import ConfigError
from tests.conftest import BASE_CONFIG, Writer

POLICIES = (
    BASE_CONFIG
    + """\
escalationPolicies:
  night:
    steps:
      - {afterMs: 0, targets: [oncall]}
      - {afterMs: 900000, targets: [log, oncall]}
    repeatAfterMs: 3600000
"""
)
WATCHER = "id: w\nstrategy: webhook\ndeliveryTargets: [oncall]\n"


def problems(config: Path) -> list[tuple[int | None, str, str]]:
    with pytest.raises(ConfigError) as caught:
        load_config(config, environ={})
    return [(i.line, i.key, i.message) for i in caught.value.issues]


def test_a_policy_loads_with_its_steps_and_repeat(project: Writer) -> None:
    """A valid policy, named by a watcher and as the default, loads as written."""
    config = POLICIES + "defaultEscalationPolicy: night\n"
    loaded = load_config(project(config, watchers__w_yaml=WATCHER + "escalationPolicy: night\n"), environ={})
    policy = loaded.service.escalation_policies["night"]
    assert ([0, 900000], [["oncall"], ["log", "oncall"]], 3600000) == (
        [s.after_ms for s in policy.steps],
        [s.targets for s in policy.steps],
        policy.repeat_after_ms,
    )
    assert ("night", "night") == (
        loaded.service.default_escalation_policy,
        loaded.watchers[0].spec.escalation_policy,
    )


def test_unknown_policy_names_are_errors_at_their_line(project: Writer) -> None:
    """defaultEscalationPolicy and a watcher's escalationPolicy must name a policy (with a hint)."""
    config = POLICIES + "defaultEscalationPolicy: nigth\n"
    found = problems(project(config, watchers__w_yaml=WATCHER + "escalationPolicy: day\n"))
    assert [(13, "defaultEscalationPolicy"), (4, "escalationPolicy")] == [
        (line, key) for line, key, _ in found
    ]
    assert "unknown escalation policy 'nigth' (did you mean 'night'?); known policies: night" == found[0][2]


def test_unknown_step_target_is_an_error_at_its_key(project: Writer) -> None:
    """A step's target must be a configured target."""
    config = BASE_CONFIG + "escalationPolicies:\n  p:\n    steps:\n      - {afterMs: 0, targets: [oncal]}\n"
    [(line, key, message)] = problems(project(config))
    assert (10, "escalationPolicies.p.steps[0].targets[0]") == (line, key)
    assert message.startswith("unknown target 'oncal' (did you mean 'oncall'?)")


@pytest.mark.parametrize(
    ("policy", "key", "words"),
    [
        ("{steps: []}", "escalationPolicies.p.steps", "at least 1 item"),
        ("{steps: [{afterMs: 0, targets: []}]}", "escalationPolicies.p.steps[0].targets", "at least 1 item"),
        (
            "{steps: [{afterMs: 5, targets: [oncall]}, {afterMs: 4, targets: [log]}]}",
            "escalationPolicies.p.steps",
            "step 1 has afterMs 4, earlier than step 0 (5)",
        ),
        ("{steps: [{afterMs: -1, targets: [oncall]}]}", "escalationPolicies.p.steps[0].afterMs", "0"),
        (
            "{steps: [{afterMs: 0, targets: [oncall]}], repeatAfterMs: 0}",
            "escalationPolicies.p.repeatAfterMs",
            "0",
        ),
        (
            "{steps: [{afterMs: 0, targets: [oncall]}], repeatAfterMs: 1}",
            "escalationPolicies.p.repeatAfterMs",
            "repeatAfterMs 1 is below the floor of 60000 (one minute)",
        ),
        (
            "{steps: [{afterMs: 0, targets: [oncall]}], repeatAfterMs: 59999}",
            "escalationPolicies.p.repeatAfterMs",
            "use 60000 or more, or null for no repeat",
        ),
        (
            "{steps: [{afterMs: '5', targets: [oncall]}]}",
            "escalationPolicies.p.steps[0].afterMs",
            "whole number",
        ),
        ("{steps: [{afterMs: 0, targets: [oncall], wait: 1}]}", "escalationPolicies.p.steps[0].wait", ""),
    ],
)
def test_malformed_policies_are_errors(project: Writer, policy: str, key: str, words: str) -> None:
    """Empty steps or targets, steps out of time order, bad numbers and unknown keys are refused."""
    [(line, found_key, message)] = problems(project(BASE_CONFIG + f"escalationPolicies:\n  p: {policy}\n"))
    assert (8, key) == (line, found_key)
    assert words in message


def test_steps_with_equal_after_ms_are_fine(project: Writer) -> None:
    """Two steps at the same time are allowed (non-decreasing, not increasing)."""
    config = (
        BASE_CONFIG
        + "escalationPolicies:\n  p: {steps: [{afterMs: 5, targets: [oncall]},"
        + " {afterMs: 5, targets: [log]}]}\n"
    )
    assert 2 == len(load_config(project(config), environ={}).service.escalation_policies["p"].steps)


@pytest.mark.parametrize(
    ("url", "loaded"),
    [("https://sentinel.example.com/", "https://sentinel.example.com"), ("http://10.0.0.1:8765/ops", None)],
)
def test_public_url_is_kept_without_a_trailing_slash(project: Writer, url: str, loaded: str | None) -> None:
    """server.publicUrl is an http(s) base URL, stored without its trailing slash."""
    config = load_config(project(BASE_CONFIG + f"server: {{publicUrl: '{url}'}}\n"), environ={})
    assert (loaded or url) == config.service.server.public_url


@pytest.mark.parametrize("url", ["ftp://example.com", "sentinel.example.com", "https://x.example.com/#inbox"])
def test_bad_public_url_is_an_error(project: Writer, url: str) -> None:
    """A publicUrl that is not an http(s) base URL is refused at its key."""
    [(_, key, _)] = problems(project(BASE_CONFIG + f"server: {{publicUrl: '{url}'}}\n"))
    assert "server.publicUrl" == key
