"""Upstream ``${…}`` placeholders become Sentinel templates that render what upstream sent."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sentinel_hooks.config.openclaw.templates import (
    UPSTREAM_PATH,
    Constant,
    TemplateProblem,
    convert_text,
    convert_value,
    escape_literal,
    same_path,
)
from sentinel_hooks.core.templates.render import compile_text, compile_value, template_variables

VARIABLES = template_variables(
    payload={"ethereum": {"usd": 5001}, "items": [{"id": "a"}], "x-y": True, "note": None},
    previous=None,
    watcher_id="eth-price-watch",
    skill_id=None,
    tags=[],
    event_name="eth_target_hit",
    trigger_kind="match",
    priority="high",
    timestamp="2026-03-04T15:00:00.000Z",
)


def rendered(template: Any) -> Any:
    return compile_value(template, name="t").render(VARIABLES)


def test_whole_placeholder_keeps_the_json_type() -> None:
    """`${payload.ethereum.usd}` carries over and still gives the number, as upstream did."""
    converted = convert_value({"price": "${payload.ethereum.usd}", "ok": "${payload.x-y}"}, same_path)
    assert ({"price": 5001, "ok": True}, []) == (rendered(converted.value), converted.changed)


def test_every_upstream_root_is_a_sentinel_root() -> None:
    """watcher.id, event.name, timestamp and payload paths render in Sentinel."""
    template = {"w": "${watcher.id}", "e": "${event.name}", "t": "${timestamp}", "i": "${payload.items.0.id}"}
    expected = {"w": "eth-price-watch", "e": "eth_target_hit", "t": "2026-03-04T15:00:00.000Z", "i": "a"}
    assert expected == rendered(convert_value(template, same_path).value)


def test_jinja_syntax_in_upstream_text_stays_literal() -> None:
    """Upstream sent `{{ x }}` and `{% if %}` as written; so does the converted template."""
    text = "alerts {{ not jinja }} {% if x %} {# c #} }} %}"
    assert text == rendered(convert_value({"a": text}, same_path).value["a"])


def test_placeholder_inside_text_is_filled_in_and_reported() -> None:
    """Upstream sent `price ${payload.x}` as written; Sentinel interpolates it, and says so."""
    converted = convert_value({"note": "price is ${payload.ethereum.usd} now"}, same_path)
    assert "price is 5001 now" == rendered(converted.value)["note"]
    assert ["note"] == [path for path, _ in converted.changed]


def test_placeholder_upstream_refuses_is_dropped_with_reason() -> None:
    """`${secrets.token}` was an error upstream: the key is not carried, and the reason says why."""
    converted = convert_value({"keep": 1, "token": "${secrets.token}", "list": ["${payload}"]}, same_path)
    assert {"keep": 1, "list": []} == converted.value
    assert ["token", "list[0]"] == [path for path, _ in converted.dropped]
    assert "not one upstream accepts" in converted.dropped[0][1]


def test_unknown_placeholder_inside_text_stays_literal() -> None:
    """Inside longer text, a placeholder upstream did not know was sent as written: still is."""
    text = "cost ${secrets.x} and ${}"
    assert text == rendered(convert_value({"a": text}, same_path).value["a"])


def test_dedupe_key_text_interpolates_as_upstream_did() -> None:
    """dedupeKeyTemplate placeholders were filled in anywhere upstream: no change to report."""
    result = convert_text("${watcher.id}:${payload.ethereum.usd}", same_path, interpolates=True)
    assert ([], "eth-price-watch:5001") == (
        result.changes,
        compile_text(result.text, name="d").render(VARIABLES),
    )


def test_dedupe_key_with_refused_placeholder_is_an_error() -> None:
    """A dedupe key upstream could not render cannot be carried over."""
    with pytest.raises(TemplateProblem, match="secrets"):
        convert_text("k-${secrets.x}", same_path, interpolates=True)


def test_constant_path_becomes_literal_text() -> None:
    """A mapper may give a known value (a dropped skillId): it is written as literal text."""

    def mapper(path: str) -> str | Constant:
        return Constant("skills.{{x}}") if path == "watcher.skillId" else path

    converted = convert_value({"s": "${watcher.skillId}", "t": "in ${watcher.skillId}"}, mapper)
    assert {"s": "skills.{{x}}", "t": "in skills.{{x}}"} == rendered(converted.value)


MARKUP = st.text(alphabet="${}%#ab .-_\n\"'\\", max_size=40)


@given(MARKUP)
def test_any_upstream_literal_renders_unchanged(text: str) -> None:
    """Text upstream sent as written renders to exactly itself after conversion (hypothesis)."""
    whole = text.startswith("${") and text.endswith("}") and UPSTREAM_PATH.match(text[2:-1].strip())
    try:
        converted = convert_text(text, same_path, interpolates=False)
    except TemplateProblem:
        assert text.startswith("${")  # only text upstream refused is dropped
        return
    if converted.changes or whole:
        return  # it holds a placeholder upstream filled in (whole) or Sentinel now fills in
    assert text == rendered({"v": converted.text})["v"]


@given(MARKUP)
def test_escaped_text_renders_unchanged(text: str) -> None:
    """escape_literal makes any text a template that renders to itself (hypothesis)."""
    assert text == compile_text(escape_literal(text), name="e").render(VARIABLES)
