"""Every bad input of SPEC.md §13 row 1 fails with file, line and key in the message."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.errors import ConfigError, ConfigIssue
from tests.conftest import BASE_CONFIG, Writer

CONFIG = BASE_CONFIG.replace("allowedHosts: [", "allowedHosts: [events.pagerduty.com, ")
WATCHER = """\
id: price
strategy: http-poll
endpoint: https://api.example.com/price
intervalMs: 15000
conditions:
  - {path: usd, op: lt, value: 2000}
fire:
  eventName: price_low
deliveryTargets: [oncall]
"""


def issues_of(config: Path, env: dict[str, str] | None = None) -> list[ConfigIssue]:
    with pytest.raises(ConfigError) as caught:
        load_config(config, environ=env or {})
    return caught.value.issues


def only_issue(config: Path, env: dict[str, str] | None = None) -> ConfigIssue:
    found = issues_of(config, env)
    assert len(found) == 1, found
    return found[0]


def test_valid_watcher_loads(project: Writer) -> None:
    """The reference watcher is valid, so each test below breaks exactly one thing."""
    loaded = load_config(project(watchers__price_yaml=WATCHER), environ={})
    assert ["price"] == [w.spec.id for w in loaded.watchers]


def test_malformed_yaml_names_file_and_line(project: Writer) -> None:
    """A YAML syntax error reports the file and the line of the problem."""
    issue = only_issue(project(watchers__w_yaml="id: a\nconditions: [1, 2\nfire: {}\n"))
    assert issue.file.endswith("watchers/w.yaml")
    assert issue.line in (2, 3)
    assert issue.message.startswith("YAML:")


def test_duplicate_key_is_an_error(project: Writer) -> None:
    """Duplicate keys are refused, not merged, with both lines."""
    issue = only_issue(project(watchers__w_yaml=WATCHER + "intervalMs: 20000\n"))
    assert (10, "intervalMs") == (issue.line, issue.key)
    assert "duplicate key 'intervalMs' (first on line 4)" in issue.message


def test_unknown_key_gets_a_hint(project: Writer) -> None:
    """A misspelt key is reported at its line with a 'did you mean'."""
    text = WATCHER.replace("intervalMs: 15000", "intervalMS: 15000")
    found = issues_of(project(watchers__w_yaml=text))
    unknown = next(i for i in found if i.key == "intervalMS")
    assert 4 == unknown.line
    assert "did you mean 'intervalMs'?" in unknown.message


def test_unknown_key_in_service_config(project: Writer) -> None:
    """sentinel.yaml keys are checked the same way."""
    issue = only_issue(project("hookResponseTimeoutMS: 5\n"))
    assert issue.file.endswith("sentinel.yaml")
    assert (1, "hookResponseTimeoutMS") == (issue.line, issue.key)
    assert "did you mean 'hookResponseTimeoutMs'?" in issue.message


def test_wrong_type_names_key_and_value(project: Writer) -> None:
    """A value of the wrong type names the key, the line and what was given."""
    issue = only_issue(project(watchers__w_yaml=WATCHER.replace("intervalMs: 15000", "intervalMs: soon")))
    assert (4, "intervalMs") == (issue.line, issue.key)
    assert "'soon'" in issue.message


def test_bad_cron(project: Writer) -> None:
    """A cron schedule that does not parse is a load error at its line."""
    text = WATCHER.replace("intervalMs: 15000", 'schedule: "61 * * * *"')
    issue = only_issue(project(watchers__w_yaml=text))
    assert (4, "schedule") == (issue.line, issue.key)
    assert "not valid" in issue.message


def test_cron_with_wrong_field_count(project: Writer) -> None:
    """Only 5 or 6 cron fields are accepted."""
    text = WATCHER.replace("intervalMs: 15000", 'schedule: "* * * *"')
    issue = only_issue(project(watchers__w_yaml=text))
    assert "4 fields" in issue.message


def test_interval_below_floor(project: Writer) -> None:
    """intervalMs under limits.minIntervalMs is refused with the limit named."""
    issue = only_issue(project(watchers__w_yaml=WATCHER.replace("15000", "200")))
    assert (4, "intervalMs") == (issue.line, issue.key)
    assert "limits.minIntervalMs (1000)" in issue.message


def test_bad_regex(project: Writer) -> None:
    """A `matches` pattern that RE2 cannot compile is refused at load."""
    text = WATCHER.replace(
        "{path: usd, op: lt, value: 2000}", "{path: name, op: matches, value: '(unclosed'}"
    )
    issue = only_issue(project(watchers__w_yaml=text))
    assert 6 == issue.line
    assert issue.key.startswith("conditions[0]")
    assert "regular expression" in issue.message


def test_template_syntax_error(project: Writer) -> None:
    """A Jinja2 syntax error in a template is a load error at that key."""
    text = WATCHER.replace(
        "  eventName: price_low\n",
        "  eventName: price_low\n  messageTemplate: 'p {{ payload.usd '\n",
    )
    issue = only_issue(project(watchers__w_yaml=text))
    assert (9, "fire.messageTemplate") == (issue.line, issue.key)


def test_unknown_template_variable(project: Writer) -> None:
    """A template naming an unknown variable is refused at load, naming the variable."""
    text = WATCHER.replace(
        "  eventName: price_low\n",
        "  eventName: price_low\n  payloadTemplate: {p: '${paylod.usd}'}\n",
    )
    issue = only_issue(project(watchers__w_yaml=text))
    assert (9, "fire.payloadTemplate.p") == (issue.line, issue.key)
    assert "paylod" in issue.message


def test_path_below_a_known_template_variable(project: Writer) -> None:
    """``${watcher.id.length}`` is refused at load (watcher.id is a string), with the filter to use."""
    text = WATCHER.replace(
        "  eventName: price_low\n",
        "  eventName: price_low\n  messageTemplate: 'on ${watcher.id.length}'\n",
    )
    issue = only_issue(project(watchers__w_yaml=text))
    assert (9, "fire.messageTemplate") == (issue.line, issue.key)
    assert "'watcher.id.length': watcher.id is a string" in issue.message
    assert "{{ watcher.id | length }}" in issue.message


def test_host_not_allowed(project: Writer) -> None:
    """An endpoint whose host is not in allowedHosts is refused with the way out."""
    text = WATCHER.replace("api.example.com", "evil.example.net")
    issue = only_issue(project(watchers__w_yaml=text))
    assert (3, "endpoint") == (issue.line, issue.key)
    assert "allowedHosts" in issue.message
    assert "evil.example.net" in issue.message


def test_wildcard_host_allowed(project: Writer) -> None:
    """`*.example.org` allows names below it."""
    text = WATCHER.replace("api.example.com", "a.b.example.org")
    assert 1 == len(load_config(project(watchers__w_yaml=text), environ={}).watchers)


def test_operator_goal_too_long(project: Writer) -> None:
    """operatorGoal over maxOperatorGoalChars is refused with both numbers."""
    text = WATCHER.replace(
        "  eventName: price_low\n", f"  eventName: price_low\n  operatorGoal: {'x' * 12001}\n"
    )
    issue = only_issue(project(watchers__w_yaml=text))
    assert (9, "fire.operatorGoal") == (issue.line, issue.key)
    assert "12001" in issue.message
    assert "12000" in issue.message


def test_unknown_target(project: Writer) -> None:
    """A deliveryTargets name that is not configured is refused with a hint."""
    issue = only_issue(project(watchers__w_yaml=WATCHER.replace("[oncall]", "[oncal]")))
    assert (9, "deliveryTargets[0]") == (issue.line, issue.key)
    assert "did you mean 'oncall'?" in issue.message


def test_unknown_model(project: Writer) -> None:
    """fire.model must name a configured model."""
    text = WATCHER.replace("  eventName: price_low\n", "  eventName: price_low\n  model: claude\n")
    issue = only_issue(project(watchers__w_yaml=text))
    assert (9, "fire.model") == (issue.line, issue.key)
    assert "unknown model 'claude'" in issue.message


def test_malformed_skill(project: Writer) -> None:
    """A SKILL.md without front matter is reported with its file."""
    issue = only_issue(project(skills__triage__SKILL_md="# no front matter\n"))
    assert issue.file.endswith("skills/triage/SKILL.md")
    assert 1 == issue.line


def test_skill_front_matter_missing_description(project: Writer) -> None:
    """Front matter keys are validated with their lines."""
    issue = only_issue(project(skills__triage__SKILL_md="---\nname: Triage\n---\nbody\n"))
    assert "description" == issue.key
    assert "required" in issue.message


def test_unknown_skill_id(project: Writer) -> None:
    """skillId must name a skills/<id>/SKILL.md."""
    issue = only_issue(project(watchers__w_yaml="skillId: triage\n" + WATCHER))
    assert (1, "skillId") == (issue.line, issue.key)


def test_unset_env_variable(project: Writer) -> None:
    """An unset ${env:NAME} without default is an error naming the variable and the way out."""
    text = WATCHER.replace("https://api.example.com/price", "https://api.example.com/${env:PRICE_PATH}")
    issue = only_issue(project(watchers__w_yaml=text))
    assert (3, "endpoint") == (issue.line, issue.key)
    assert "PRICE_PATH is not set" in issue.message


@pytest.mark.parametrize(
    ("where", "line", "key"),
    [
        ("  pager: {type: pagerduty, routingKey: '${env:ROUTING}'}\n", 7, "targets.pager.routingKey"),
        ("  mail: ${env:MAIL_TARGET}\n", 7, "targets.mail"),
        ("server: {port: '${env:PORT}'}\n", 7, "server.port"),
        ("escalationTargets: ${env:ESCALATE}\n", 7, "escalationTargets"),
    ],
    ids=["secret", "whole-target", "number", "list"],
)
def test_unset_env_variable_is_one_error(project: Writer, where: str, line: int, key: str) -> None:
    """One unset variable is one error, its own: the models' and the checks' words about the
    empty text left in its place (a missing key, a wrong type, a too-short value) are not added."""
    issue = only_issue(project(CONFIG + where, watchers__price_yaml=WATCHER))
    assert (line, key) == (issue.line, issue.key)
    assert "is not set (set it, or give a default: ${env:" in issue.message


def test_empty_secret_is_refused_in_words(project: Writer) -> None:
    """A value under its minimum length says so in words (not "at least 1 item after validation")."""
    issue = only_issue(project(CONFIG + "  pager: {type: pagerduty, routingKey: ''}\n"))
    assert ("targets.pager.routingKey", "is empty: give it a value") == (issue.key, issue.message)


def test_env_default_used(project: Writer) -> None:
    """${env:NAME:-default} falls back to the default."""
    text = WATCHER.replace("intervalMs: 15000", "intervalMs: ${env:EVERY:-20000}")
    loaded = load_config(project(watchers__w_yaml=text), environ={})
    assert 20000 == loaded.watchers[0].spec.interval_ms  # type: ignore[union-attr]


def test_env_secret_redacted_in_errors(project: Writer) -> None:
    """A value from the environment never appears in an error message."""
    text = WATCHER.replace("intervalMs: 15000", "intervalMs: ${env:TOKEN}")
    issue = only_issue(project(watchers__w_yaml=text), env={"TOKEN": "s3cr3t-token"})
    assert "s3cr3t-token" not in str(issue)
    assert "***" in issue.message


def test_all_errors_of_a_file_at_once(project: Writer) -> None:
    """Several problems in one file are all reported, in one go."""
    text = WATCHER.replace("intervalMs: 15000", "intervalMS: 15000").replace("[oncall]", "[nope]")
    text = text.replace("op: lt", "op: less")
    found = issues_of(project(watchers__w_yaml=text))
    assert {"intervalMS", "conditions[0].op"} <= {i.key for i in found}


def test_enum_value_hint(project: Writer) -> None:
    """A misspelt enum value gets a hint."""
    text = WATCHER.replace("  eventName: price_low\n", "  eventName: price_low\n  priority: hgih\n")
    issue = only_issue(project(watchers__w_yaml=text))
    assert (9, "fire.priority") == (issue.line, issue.key)
    assert "did you mean 'high'?" in issue.message


def test_unknown_strategy_hint(project: Writer) -> None:
    """An unknown strategy lists the strategies and suggests the closest."""
    issue = only_issue(project(watchers__w_yaml=WATCHER.replace("http-poll", "http-pol")))
    assert (2, "strategy") == (issue.line, issue.key)
    assert "did you mean 'http-poll'?" in issue.message


def test_strategy_required_key_missing(project: Writer) -> None:
    """A strategy-specific required key that is missing is named."""
    text = WATCHER.replace("endpoint: https://api.example.com/price\n", "")
    issue = only_issue(project(watchers__w_yaml=text))
    assert "endpoint" == issue.key
    assert "required" in issue.message


def test_interval_or_schedule_required(project: Writer) -> None:
    """A polled watcher needs intervalMs or schedule."""
    issue = only_issue(project(watchers__w_yaml=WATCHER.replace("intervalMs: 15000\n", "")))
    assert "exactly one of intervalMs or schedule" in issue.message


def test_duplicate_watcher_ids(project: Writer) -> None:
    """Two watchers with one id: the second is refused, pointing at the first."""
    found = issues_of(project(watchers__a_yaml=WATCHER, watchers__b_yaml=WATCHER))
    assert 1 == len(found)
    assert found[0].file.endswith("b.yaml")
    assert "a.yaml:1" in found[0].message


def test_list_form_reports_index(project: Writer) -> None:
    """In a `watchers:` list, keys are prefixed by the watcher's index and lines are true."""
    body = "watchers:\n" + "".join(
        "    " + line + "\n" if i else "  - " + line + "\n"
        for i, line in enumerate(WATCHER.replace("15000", "200").splitlines())
    )
    issue = only_issue(project(watchers__w_yaml=body))
    assert ("watchers[0].intervalMs", 5) == (issue.key, issue.line)


def test_too_many_conditions(project: Writer) -> None:
    """More leaf conditions than limits.maxConditionsPerWatcher is refused."""
    config = "allowedHosts: [api.example.com]\nlimits: {maxConditionsPerWatcher: 1}\n"
    config += "targets: {oncall: {type: console}}\n"
    text = WATCHER.replace(
        "  - {path: usd, op: lt, value: 2000}\n",
        "  - {path: usd, op: lt, value: 2000}\n  - {path: eur, op: lt, value: 2000}\n",
    )
    issue = only_issue(project(config, watchers__w_yaml=text))
    assert "conditions" == issue.key
    assert "maxConditionsPerWatcher (1)" in issue.message


def test_missing_config_file(tmp_path: Path) -> None:
    """A missing sentinel.yaml says how to create one."""
    issue = only_issue(tmp_path / "sentinel.yaml")
    assert "sentinel init" in issue.message


def test_token_required_off_loopback(project: Writer) -> None:
    """A non-loopback server host without apiToken is refused."""
    issue = only_issue(project("server: {host: 0.0.0.0}\n"))
    assert "apiToken" in issue.message


def test_goal_file_outside_project(project: Writer) -> None:
    """operatorGoalFile may not escape the project directory."""
    text = WATCHER.replace(
        "  eventName: price_low\n", "  eventName: price_low\n  operatorGoalFile: ../etc/passwd\n"
    )
    issue = only_issue(project(watchers__w_yaml=text))
    assert (9, "fire.operatorGoalFile") == (issue.line, issue.key)
    assert "outside" in issue.message
