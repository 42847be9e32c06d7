"""actionPolicy judge rules, per-rule ``enabled`` and ``circuitBreaker`` in sentinel.yaml (SPEC §5.4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.config.service import JudgeRule, PolicyRule
from sentinel_hooks.errors import ConfigError
from tests.conftest import BASE_CONFIG, Writer

MODELS = BASE_CONFIG.replace(
    "models:\n", 'models:\n  judge: {type: openai, baseUrl: "http://127.0.0.1:9/v1", model: small}\n'
)


def problems(config: Path) -> list[tuple[int | None, str, str]]:
    with pytest.raises(ConfigError) as caught:
        load_config(config, environ={})
    return [(i.line, i.key, i.message) for i in caught.value.issues]


def policy(rules: str, extra: str = "") -> str:
    return MODELS + "actionPolicy:\n" + extra + "  rules:\n" + rules


def test_a_judge_rule_loads_with_its_defaults(project: Writer) -> None:
    """A judge rule gets threshold 0.7, 5000 ms, fails closed, judges the actions a session proposes
    (run_command and MCP tool calls); the breaker is 5."""
    text = policy(
        "    - {id: no-destroy, kind: judge, model: judge, prompt: never delete data, decision: deny}\n"
    )
    loaded = load_config(project(text), environ={}).service.action_policy
    [rule] = loaded.rules
    assert isinstance(rule, JudgeRule)
    assert (0.7, 5000, False, ["run_command", "mcp"], True, 5) == (
        rule.confidence_threshold,
        rule.timeout_ms,
        rule.fail_open,
        rule.applies_to,
        rule.enabled,
        loaded.circuit_breaker,
    )


def test_disabled_rules_are_left_out_of_both_lists(project: Writer) -> None:
    """``enabled: false`` keeps a rule in the file but out of the plain and judge rules used."""
    text = policy(
        "    - {id: off, decision: deny, enabled: false}\n"
        "    - {id: on, decision: auto}\n"
        "    - {id: j-off, kind: judge, model: judge, prompt: p, decision: deny, enabled: false}\n",
        "  circuitBreaker: 2\n",
    )
    loaded = load_config(project(text), environ={}).service.action_policy
    assert (["on"], [], 2) == ([r.id for r in loaded.plain_rules], loaded.judge_rules, loaded.circuit_breaker)
    assert isinstance(loaded.rules[0], PolicyRule)


def test_a_judge_rule_names_a_configured_model(project: Writer) -> None:
    """An unknown model is a load error at the rule's model key, with a hint."""
    text = policy("    - {id: j, kind: judge, model: judg, prompt: p, decision: deny}\n")
    [(line, key, message)] = problems(project(text))
    assert (line, key) == (text.count("\n"), "actionPolicy.rules[0].model")
    assert "unknown model 'judg' (did you mean 'judge'?)" in message


def test_a_scripted_model_cannot_judge(project: Writer) -> None:
    """The scripted backend answers no question: naming it is a load error."""
    text = policy("    - {id: j, kind: judge, model: rules, prompt: p, decision: deny}\n")
    [(_, key, message)] = problems(project(text))
    assert ("actionPolicy.rules[0].model", True) == (key, "scripted and cannot judge" in message)


@pytest.mark.parametrize(
    ("rule", "key", "words"),
    [
        ("{id: j, kind: judge, model: judge, prompt: p, decision: auto}", "decision", "needs_approval"),
        ("{id: j, kind: judge, model: judge, decision: deny}", "prompt", "required key is missing"),
        (
            "{id: j, kind: judge, model: judge, prompt: p, decision: deny, confidenceThreshold: 1.5}",
            "confidenceThreshold",
            "less than or equal to 1",
        ),
        ("{id: j, kind: judge, model: judge, prompt: p, decision: deny, timeoutMs: 0}", "timeoutMs", "100"),
        (
            "{id: j, kind: judge, model: judge, prompt: p, decision: deny, failOpen: 1}",
            "failOpen",
            "true or false",
        ),
        (
            "{id: j, kind: judge, model: judge, prompt: p, decision: deny, appliesTo: [mail]}",
            "appliesTo[0]",
            "run_command",
        ),
        (
            "{id: j, kind: judge, model: judge, prompt: p, decision: needs_approval, appliesTo: [notify]}",
            "appliesTo",
            "decision: deny",
        ),
        ("{id: j, kind: jugde, decision: deny}", "", "kind must be plain (the default) or judge"),
        ("{id: j, decision: deny, enabled: 'no'}", "enabled", "true or false"),
    ],
)
def test_bad_judge_rules_are_load_errors_at_their_key(
    project: Writer, rule: str, key: str, words: str
) -> None:
    """Every bad judge-rule value is reported at file:line with its key."""
    text = policy(f"    - {rule}\n")
    found = problems(project(text))
    expected_key = "actionPolicy.rules[0]" + (f".{key}" if key else "")
    assert [expected_key] == [k for _, k, _ in found]
    assert words in found[0][2]
    assert text.count("\n") == found[0][0]


def test_circuit_breaker_must_be_positive(project: Writer) -> None:
    """circuitBreaker: 0 would stop every session before it starts: refused."""
    text = MODELS + "actionPolicy: {circuitBreaker: 0}\n"
    [(_, key, message)] = problems(project(text))
    assert ("actionPolicy.circuitBreaker", True) == (key, "greater than or equal to 1" in message)
