"""A hostile openclaw-sentinel file: imported text stays text, and the file written loads as written.

Upstream strings are data; Sentinel fills ``${env:…}`` in any value of a file it loads, and YAML
reads a carriage return or U+2028 as a line break. Neither may let an imported value reach the
service's environment or add a key to the written file.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sentinel_hooks.config.envvars import interpolate
from sentinel_hooks.config.loader import validate_watcher
from sentinel_hooks.config.openclaw import convert_watcher, visible, watcher_yaml
from sentinel_hooks.config.openclaw.convert import Conversion
from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.config.yamlfile import parse_yaml
from tests.config.test_openclaw_import import ETH_PRICE

LINE_BREAKS = "\r\n\x85\u2028\u2029\x0b\x0c"


def upstream(**changes: Any) -> dict[str, Any]:
    watcher = copy.deepcopy(ETH_PRICE)
    watcher.update(changes)
    return watcher


def dropped(conversion: Conversion) -> dict[str, str]:
    return {n.path: n.reason for n in conversion.notes if n.kind == "dropped"}


def loads_as_written(conversion: Conversion, source: str = "state.json") -> dict[str, Any]:
    """The written file read as `validate` reads it: the same data, no env reference, valid."""
    text = watcher_yaml(conversion, source)
    document = parse_yaml(text, display="w.yaml")
    assert conversion.watcher == document.data
    assert [] == interpolate(document.data, {}).problems
    allowing = ServiceConfig.model_validate({"allowedHosts": ["api.coingecko.com"]})
    watcher, issues = validate_watcher(
        document.data, display="w.yaml", lines=document.lines, service=allowing, skills={}, base_dir=Path()
    )
    assert ([], True) == (issues, watcher is not None)
    return document.data  # type: ignore[no-any-return]


def test_env_reference_in_a_header_is_refused_with_a_report_line() -> None:
    """`${env:SENTINEL_API_TOKEN}` in a header would send the service's secret: the header is dropped."""
    conversion = convert_watcher(upstream(headers={"X-Key": "${env:SENTINEL_API_TOKEN}", "Accept": "json"}))
    assert conversion.watcher is not None
    assert {"Accept": "json"} == conversion.watcher["headers"]
    assert "fills from its own environment" in dropped(conversion)["headers.X-Key"]
    loads_as_written(conversion)


def test_env_reference_in_a_template_is_escaped_and_renders_as_written() -> None:
    """In a payload template the marker is escaped: the value is kept, and no variable is read."""
    conversion = convert_watcher(
        upstream(fire={"eventName": "e", "payloadTemplate": {"k": "a ${env:HOME} b"}})
    )
    assert conversion.watcher is not None
    assert "${env:" not in conversion.watcher["fire"]["payloadTemplate"]["k"]
    assert "fire.payloadTemplate.k" not in dropped(conversion)
    loads_as_written(conversion)


def test_env_reference_in_the_endpoint_skips_the_watcher() -> None:
    """Without its endpoint a watcher is nothing: not imported, and the report says why."""
    conversion = convert_watcher(upstream(endpoint="https://api.coingecko.com/${env:SECRET}"))
    assert conversion.watcher is None
    assert dropped(conversion)["endpoint"].startswith("not imported: holds '${env:'")


def test_env_reference_in_a_condition_drops_it_and_disables_the_watcher() -> None:
    """A condition whose value would be read from the environment is dropped; the watcher is off."""
    condition = {"path": "ethereum.usd", "op": "eq", "value": "${env:PRICE}"}
    conversion = convert_watcher(upstream(conditions=[condition]))
    assert conversion.watcher is not None
    assert ([], False) == (conversion.watcher["conditions"], conversion.watcher["enabled"])
    assert "conditions[0].value" in dropped(conversion)


def test_over_long_goal_and_text_are_refused_with_a_report_line() -> None:
    """A 30 MB operatorGoal (over maxOperatorGoalChars) and a 100 KB header are dropped, reported."""
    fire = {"eventName": "e", "operatorGoal": "g" * 30_000_000}
    conversion = convert_watcher(upstream(fire=fire, headers={"X-Big": "h" * 100_000}), max_goal_chars=12000)
    assert conversion.watcher is not None
    assert "operatorGoal" not in conversion.watcher["fire"]
    assert {} == conversion.watcher["headers"]
    reasons = dropped(conversion)
    assert "30000000 characters, over maxOperatorGoalChars (12000)" == reasons["fire.operatorGoal"]
    assert reasons["headers.X-Big"].startswith("100000 characters, over the limit")
    loads_as_written(conversion)


def test_conditions_over_the_limit_are_dropped_and_the_watcher_disabled() -> None:
    """limits.maxConditionsPerWatcher: the first conditions are kept, the rest reported."""
    conditions = [{"path": f"p{i}", "op": "exists"} for i in range(5)]
    conversion = convert_watcher(upstream(conditions=conditions), max_conditions=3)
    assert conversion.watcher is not None
    assert ["p0", "p1", "p2"] == [c["path"] for c in conversion.watcher["conditions"]]
    assert {"conditions[3]", "conditions[4]"} <= set(dropped(conversion))
    assert conversion.watcher["enabled"] is False


def test_carriage_return_and_u2028_add_no_key() -> None:
    """A value holding YAML line breaks is written with escapes: it reads back as itself."""
    goal = "goal\r\nenabled: false\rstrategy: sse\u2028tags: [x]"
    conversion = convert_watcher(
        upstream(fire={"eventName": "e\u2028x", "operatorGoal": goal}, headers={"X-B": "a\rb: c"})
    )
    data = loads_as_written(conversion)
    assert goal == data["fire"]["operatorGoal"]
    assert (True, "http-poll") == (data["enabled"], data["strategy"])  # as upstream, not as the goal says
    assert {"X-B": "a\rb: c"} == data["headers"]


def test_source_name_and_notes_in_comments_stay_comments() -> None:
    """A newline in the input's file name, or in a reported value, is shown escaped in the header."""
    conversion = convert_watcher(upstream(metadata={"k\nid: evil": "v\u2028x"}))
    text = watcher_yaml(conversion, "w\nid: boom.json")
    header = text.split("\nid: ", 1)[0]
    assert all(line.startswith("#") for line in header.splitlines())
    assert "from w\\nid: boom.json (" in header
    assert "eth-price-watch" == loads_as_written(conversion, "w\nid: boom.json")["id"]


def test_visible_escapes_what_a_terminal_would_act_on() -> None:
    """Line breaks and escape sequences print as their escapes; printable text is untouched."""
    assert ("a\\x1b[2Jb\\u2028c\\r", "plain — text") == (
        visible("a\x1b[2Jb\u2028c\r"),
        visible("plain — text"),
    )


PIECES = st.one_of(
    st.characters(codec="utf-8"),
    st.sampled_from([*LINE_BREAKS, "${env:HOME}", "${payload.x}", "{{", "'", '"', "#", ": ", "- ", " "]),
)
TEXT = st.lists(PIECES, max_size=12).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    goal=TEXT,
    header=TEXT,
    key=TEXT.filter(bool),
    tag=TEXT,
    value=TEXT,
    template=TEXT,
)
def test_any_text_is_written_as_text(
    goal: str, header: str, key: str, tag: str, value: str, template: str
) -> None:
    """Odd strings anywhere (goal, header names and values, tags, a condition's value, a template):
    the file reads back to the converted watcher, holds no env reference and is valid (hypothesis)."""
    raw = upstream(
        headers={key: header},
        tags=[tag],
        conditions=[{"path": "ethereum.usd", "op": "eq", "value": value}],
        fire={"eventName": "e", "operatorGoal": goal, "payloadTemplate": {key: template}},
    )
    conversion = convert_watcher(raw)
    assert conversion.watcher is not None
    loads_as_written(conversion)


def test_lone_surrogate_in_a_value_or_key_is_refused_with_a_report_line() -> None:
    """JSON may spell a lone surrogate (\\ud800), which is not Unicode text: dropped, reported."""
    raw = upstream(
        headers={"X-\ud800": "v", "Accept": "json"}, fire={"eventName": "e", "operatorGoal": "a\ud800"}
    )
    conversion = convert_watcher(raw)
    assert conversion.watcher is not None
    assert ({"Accept": "json"}, None) == (
        conversion.watcher["headers"],
        conversion.watcher["fire"].get("operatorGoal"),
    )
    reasons = dropped(conversion)
    assert reasons["fire.operatorGoal"].startswith("not valid Unicode")
    assert reasons["headers.X-\ud800"].startswith("not valid Unicode")
    loads_as_written(conversion)
