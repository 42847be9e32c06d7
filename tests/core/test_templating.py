"""Rendering semantics of Sentinel templates (SPEC.md §4): placeholders, types, text."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sentinel_hooks.core.templates.render import (
    TEMPLATE_ROOTS,
    compile_text,
    compile_value,
    template_variables,
)
from sentinel_hooks.errors import TemplateError

PAYLOAD: dict[str, Any] = {
    "price": 1999.5,
    "count": 3,
    "obj": {"a": 1, "b": [True, None]},
    "list": [1, "two", {"three": 3}],
    "flag": True,
    "off": False,
    "nothing": None,
    "name": "ETH",
    "items": "the key named items",
    "x-y": "dashed",
    "unicode": "café ☕",
}


def variables(payload: Any = None, previous: Any = None) -> dict[str, Any]:
    """A render context for watcher ``eth`` firing ``eth_low`` with ``payload``."""
    return template_variables(
        payload=PAYLOAD if payload is None else payload,
        previous=previous,
        watcher_id="eth",
        skill_id="defi",
        tags=["defi", "prices"],
        event_name="eth_low",
        trigger_kind="edge",
        priority="high",
        timestamp="2026-01-01T00:00:00.000Z",
    )


def render(template: Any, context: dict[str, Any] | None = None) -> Any:
    """Compile ``template`` as a value template and render it once."""
    return compile_value(template, name="fire.payloadTemplate").render(context or variables())


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        pytest.param("count", 3, id="int"),
        pytest.param("price", 1999.5, id="float"),
        pytest.param("obj", {"a": 1, "b": [True, None]}, id="object"),
        pytest.param("list", [1, "two", {"three": 3}], id="list"),
        pytest.param("flag", True, id="bool"),
        pytest.param("nothing", None, id="null"),
        pytest.param("name", "ETH", id="string"),
    ],
)
def test_exact_dollar_placeholder_keeps_json_type(key: str, expected: Any) -> None:
    """A string that is exactly ``${path}`` renders to the value itself, type kept."""
    assert expected == render(f"${{payload.{key}}}")


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        pytest.param("count", 3, id="int"),
        pytest.param("price", 1999.5, id="float"),
        pytest.param("obj", {"a": 1, "b": [True, None]}, id="object"),
        pytest.param("list", [1, "two", {"three": 3}], id="list"),
        pytest.param("off", False, id="bool"),
        pytest.param("nothing", None, id="null"),
    ],
)
def test_exact_jinja_placeholder_keeps_json_type(key: str, expected: Any) -> None:
    """A string that is exactly ``{{ expr }}`` renders to the expression's value."""
    assert expected == render(f"{{{{ payload.{key} }}}}")


def test_exact_placeholder_type_is_kept_for_jinja_tuples_as_lists() -> None:
    """A typed expression giving a tuple (``dictsort``) is returned as JSON lists."""
    assert [["a", 1], ["b", [True, None]]] == render("{{ payload.obj | dictsort }}")


def test_surrounding_whitespace_makes_a_placeholder_text() -> None:
    """Only an exact placeholder keeps its type; with spaces around it renders as text."""
    assert " 3" == render(" ${payload.count}")


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        pytest.param("v=${payload.nothing}", "v=null", id="null"),
        pytest.param("v=${payload.flag}/${payload.off}", "v=true/false", id="booleans"),
        pytest.param("v=${payload.obj}", 'v={"a":1,"b":[true,null]}', id="compact-object"),
        pytest.param("v=${payload.list}", 'v=[1,"two",{"three":3}]', id="compact-array"),
        pytest.param("v=${payload.price}", "v=1999.5", id="float"),
        pytest.param("v={{ payload.obj }}", 'v={"a":1,"b":[true,null]}', id="jinja-object"),
        pytest.param("v={{ payload.nothing }}", "v=null", id="jinja-null"),
        pytest.param("v=${payload.unicode}", "v=café ☕", id="unicode-kept"),
    ],
)
def test_interpolated_values_render_as_json_text(template: str, expected: str) -> None:
    """Inside text, non-strings render as JSON: null, true/false, compact objects."""
    assert expected == render(template)


def test_dotted_segment_named_like_a_method_is_a_key() -> None:
    """``${payload.items}`` is the key ``items``, never ``dict.items``."""
    assert "the key named items" == render("${payload.items}")


def test_jinja_attribute_named_like_a_method_is_a_key() -> None:
    """``{{ payload.items }}`` in an expression is also the key ``items``."""
    assert "the key named items" == render("{{ payload.items }}")


def test_dash_in_path_segment_is_part_of_the_key() -> None:
    """``${payload.x-y}`` is the key ``x-y`` (not a subtraction)."""
    assert "dashed" == render("${payload.x-y}")


def test_spaces_inside_dollar_braces_are_allowed() -> None:
    """``${ payload.name }`` is the same path as ``${payload.name}``."""
    assert "ETH" == render("${ payload.name }")


def test_numeric_path_segment_indexes_an_array() -> None:
    """``${payload.list.1}`` is the second item of the array."""
    assert "two" == render("${payload.list.1}")


def test_bracket_index_in_path_is_accepted() -> None:
    """``${payload.list[2].three}`` indexes with brackets, like condition paths."""
    assert 3 == render("${payload.list[2].three}")


def test_dollar_before_jinja_expression_is_a_literal_dollar() -> None:
    """``${{ expr }}`` is a literal ``$`` followed by a Jinja2 expression."""
    assert "$1999.5" == render("${{ payload.price }}")


def test_nested_object_and_list_templates_render_each_string() -> None:
    """Strings anywhere inside objects and lists are templates; other values stay."""
    template = {"asset": "${payload.name}", "at": ["${timestamp}", 5, {"p": "${payload.price}"}]}
    expected = {"asset": "ETH", "at": ["2026-01-01T00:00:00.000Z", 5, {"p": 1999.5}]}
    assert expected == render(template)


def test_object_keys_are_never_templated() -> None:
    """A key that looks like a placeholder stays as written."""
    assert {"${payload.name}": "ETH"} == render({"${payload.name}": "${payload.name}"})


def test_constant_template_is_marked_constant() -> None:
    """A template without placeholders is constant (rendered without Jinja2)."""
    compiled = compile_value({"asset": "ETH", "n": [1, 2]}, name="fire.contextTemplate")
    assert compiled.is_constant


def test_constant_template_renders_a_fresh_copy() -> None:
    """Mutating one rendering of a constant template does not change the next one."""
    compiled = compile_value({"n": [1, 2]}, name="fire.contextTemplate")
    compiled.render(variables())["n"].append(3)
    assert {"n": [1, 2]} == compiled.render(variables())


def test_template_with_placeholder_is_not_constant() -> None:
    """A template with one placeholder anywhere is not constant."""
    assert not compile_value({"a": ["${payload.name}"]}, name="t").is_constant


def test_jinja_filter_expression_renders() -> None:
    """Whitelisted filters work: ``round(2)`` on a float keeps the number type."""
    assert 2.35 == render("{{ payload.value | round(2) }}", variables({"value": 2.3456}))


def test_for_loop_variables_are_allowed() -> None:
    """Names bound by ``{% for %}`` (and ``loop``) are usable inside the loop."""
    template = "{% for x in payload.list %}{{ loop.index }}={{ x }};{% endfor %}"
    assert '1=1;2=two;3={"three":3};' == render(template)


def test_set_variables_are_allowed() -> None:
    """Names bound by ``{% set %}`` are usable after it."""
    assert "ETH!" == render("{% set n = payload.name %}{{ n }}!")


def test_tilde_concatenation_renders_json_for_non_strings() -> None:
    """``~`` joins the text of each operand, JSON for non-strings."""
    assert "on=true" == render("{{ 'on=' ~ payload.flag }}")


def test_tojson_filter_is_compact_and_keeps_unicode() -> None:
    """``tojson`` renders compact JSON without escaping non-ASCII characters."""
    assert '{"u":"café ☕"}' == render("{{ {'u': payload.unicode} | tojson }}")


def test_default_filter_replaces_a_missing_key() -> None:
    """``default`` still works on a missing key under StrictUndefined."""
    assert "n/a" == render("{{ payload.missing | default('n/a') }}")


def test_defined_test_on_missing_key_is_false() -> None:
    """``is defined`` tells a missing key without raising."""
    assert False is render("{{ payload.missing is defined }}")


def test_watcher_event_trigger_and_timestamp_render() -> None:
    """The non-payload roots expose their documented keys."""
    template = "${watcher.id} ${watcher.tags.1} ${event.name} ${trigger.kind} ${trigger.priority}"
    assert "eth prices eth_low edge high" == render(template)


def test_previous_null_renders_as_null() -> None:
    """``previous`` is null before a first observation."""
    assert None is render("${previous}")


def test_message_template_renders_to_text() -> None:
    """``compile_text`` always renders a string, even for one exact placeholder."""
    compiled = compile_text("${payload.price}", name="fire.messageTemplate")
    assert "1999.5" == compiled.render(variables())


def test_message_template_renders_object_as_json_text() -> None:
    """A text template that is exactly ``{{ object }}`` renders compact JSON."""
    compiled = compile_text("{{ payload.obj }}", name="fire.messageTemplate")
    assert '{"a":1,"b":[true,null]}' == compiled.render(variables())


def test_missing_key_at_render_names_variable_and_template() -> None:
    """A placeholder that does not resolve raises TemplateError naming path and template."""
    compiled = compile_value({"p": "${payload.nope}"}, name="fire.payloadTemplate")
    with pytest.raises(TemplateError) as info:
        compiled.render(variables())
    assert ("payload.nope", "${payload.nope}") == (info.value.variable, info.value.template)


def test_missing_key_message_says_which_key_is_absent() -> None:
    """The render error explains the failure and where the template lives."""
    with pytest.raises(TemplateError) as info:
        render({"p": "price: ${payload.obj.zzz}"})
    expected = "fire.payloadTemplate.p: 'payload.obj.zzz' is undefined (payload.obj has no key 'zzz')"
    assert expected == info.value.reason


def test_missing_key_in_jinja_expression_names_the_whole_path() -> None:
    """``{{ payload.a.b }}`` with ``a`` absent names ``payload.a.b``."""
    with pytest.raises(TemplateError) as info:
        render("x {{ payload.a.b | upper }}")
    assert "payload.a.b" == info.value.variable


def test_index_out_of_range_is_a_render_error() -> None:
    """``${payload.list.9}`` does not resolve: an error naming the path."""
    with pytest.raises(TemplateError) as info:
        render("${payload.list.9}")
    assert "payload.list.9" == info.value.variable


def test_negative_path_segment_does_not_index() -> None:
    """``${payload.list.-1}`` is not an index (paths index only with non-negative integers)."""
    with pytest.raises(TemplateError):
        render("${payload.list.-1}")


def test_template_roots_are_documented() -> None:
    """TEMPLATE_ROOTS lists the six roots, the keys of the restricted ones and what each holds."""
    expected = {
        "payload": None,
        "previous": None,
        "watcher": {"id": "text", "skillId": "text", "tags": "texts", "eventName": "text"},
        "event": {"name": "text"},
        "trigger": {"kind": "text", "priority": "text"},
        "timestamp": "text",
    }
    assert expected == dict(TEMPLATE_ROOTS)


def test_template_variables_formats_datetime_timestamp() -> None:
    """A datetime timestamp becomes ISO 8601 UTC with milliseconds and ``Z``."""
    context = template_variables(
        payload={},
        previous=None,
        watcher_id="w",
        skill_id=None,
        tags=[],
        event_name="e",
        trigger_kind="level",
        priority="normal",
        timestamp=datetime(2026, 3, 4, 5, 6, 7, 890000, tzinfo=UTC),
    )
    assert "2026-03-04T05:06:07.890Z" == context["timestamp"]


def test_compiled_template_renders_many_times_with_different_variables() -> None:
    """One compiled template renders each context on its own."""
    compiled = compile_text("{{ payload.n }}-${payload.n}", name="t")
    rendered = [compiled.render(variables({"n": n})) for n in (1, 2)]
    assert ["1-1", "2-2"] == rendered


_KEYS = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABC_-0123456789", min_size=1, max_size=12)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@given(key=_KEYS, value=_JSON)
def test_exact_placeholder_round_trips_any_json_value(key: str, value: Any) -> None:
    """``${payload.<key>}`` renders exactly the JSON value stored under ``key``."""
    assert value == render(f"${{payload.{key}}}", variables({key: value}))


@given(value=_JSON.filter(lambda v: not isinstance(v, str)))
def test_interpolated_value_is_its_compact_json(value: Any) -> None:
    """Interpolated into text, a non-string value reads as its compact JSON."""
    expected = "=" + json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert expected == render("=${payload.v}", variables({"v": value}))


def test_dynamic_subscript_looks_up_a_key() -> None:
    """``payload[k]`` with a computed ``k`` is a key lookup too, never a method."""
    assert "the key named items" == render("{% set k = 'items' %}{{ payload[k] }}")


def test_dynamic_subscript_on_a_list_indexes() -> None:
    """``payload.list[i]`` with a computed integer indexes the array."""
    assert "two" == render("{% set i = 1 %}{{ payload.list[i] }}")
