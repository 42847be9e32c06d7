"""Grouping in sentinel.yaml and watcher files (SPEC §19): strict, envelope paths, file:line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentinel_hooks.config.grouping import group_rule
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.core.grouping import GroupRule
from sentinel_hooks.errors import ConfigError

WATCHER = """\
id: am
strategy: webhook
fire:
  group: {by: [payload.labels.alertname, trigger.priority], waitMs: 10000}
"""


def write(tmp_path: Path, config: str, watcher: str = WATCHER) -> Path:
    (tmp_path / "sentinel.yaml").write_text(config)
    (tmp_path / "watchers").mkdir(exist_ok=True)
    (tmp_path / "watchers" / "am.yaml").write_text(watcher)
    return tmp_path / "sentinel.yaml"


def test_no_grouping_by_default(tmp_path: Path) -> None:
    """Without `grouping` or `fire.group` a watcher's fires are not grouped."""
    loaded = load_config(write(tmp_path, "{}\n", "id: am\nstrategy: webhook\n"), environ={})
    spec = loaded.watchers[0].spec
    assert group_rule(spec.id, loaded.service.grouping, spec.fire.group) is None


def test_watcher_group_overrides_the_service_default_key_by_key(tmp_path: Path) -> None:
    """fire.group's keys win; those it leaves out are sentinel.yaml's."""
    config = "grouping: {intervalMs: 60000, maxFires: 50}\n"
    loaded = load_config(write(tmp_path, config), environ={})
    spec = loaded.watchers[0].spec
    expected = GroupRule(
        name="am",
        by=("payload.labels.alertname", "trigger.priority"),
        wait_ms=10000,
        interval_ms=60000,
        max_fires=50,
    )
    assert expected == group_rule(spec.id, loaded.service.grouping, spec.fire.group)


def test_service_by_groups_every_watcher_under_a_shared_name(tmp_path: Path) -> None:
    """`grouping.by` applies to a watcher without fire.group; `name` lets watchers share groups."""
    config = "grouping: {by: [watcher.tags]}\n"
    loaded = load_config(write(tmp_path, config, "id: am\nstrategy: webhook\nfire: {group: {name: db}}\n"))
    spec = loaded.watchers[0].spec
    rule = group_rule(spec.id, loaded.service.grouping, spec.fire.group)
    assert rule is not None
    assert ("db", ("watcher.tags",), 30000) == (rule.name, rule.by, rule.wait_ms)


@pytest.mark.parametrize(
    ("config", "watcher", "expected"),
    [
        (
            "grouping:\n  by: [labels.alertname]\n",
            WATCHER,
            "sentinel.yaml:2: grouping.by[0]: 'labels.alertname' is not an envelope path grouping can read;"
            " use one of watcher.id, watcher.tags, trigger.priority, payload.<path>, context.<path>",
        ),
        (
            "grouping: {waitMs: '10'}\n",
            WATCHER,
            "sentinel.yaml:1: grouping.waitMs: expected a whole number, got the text '10'",
        ),
        (
            "grouping: {groupBy: []}\n",
            WATCHER,
            "sentinel.yaml:1: grouping.groupBy: unknown key 'groupBy'",
        ),
        (
            "{}\n",
            WATCHER.replace("trigger.priority", "payload..x"),
            "watchers/am.yaml:4: fire.group.by[1]: path 'payload..x' has an empty segment",
        ),
        (
            "{}\n",
            WATCHER.replace("trigger.priority", "payload.labels.alertname"),
            "watchers/am.yaml:4: fire.group.by[1]: 'payload.labels.alertname' is listed twice",
        ),
        (
            "{}\n",
            WATCHER.replace("waitMs: 10000", "maxFires: 0"),
            "watchers/am.yaml:4: fire.group.maxFires: ",
        ),
    ],
)
def test_bad_grouping_is_refused_with_file_and_line(
    tmp_path: Path, config: str, watcher: str, expected: str
) -> None:
    """Paths outside the envelope, wrong types, unknown keys, repeats: one error naming file and line."""
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, config, watcher), environ={})
    assert expected in str(caught.value)
