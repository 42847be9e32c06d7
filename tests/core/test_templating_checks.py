"""Load-time checks of templates: syntax, forbidden tags, filters and variable names."""

from __future__ import annotations

from typing import Any

import pytest

from sentinel_hooks.core.templates.render import compile_text, compile_value
from sentinel_hooks.errors import TemplateError


def compile_error(template: Any) -> TemplateError:
    """The TemplateError that compiling ``template`` raises."""
    with pytest.raises(TemplateError) as info:
        compile_value(template, name="fire.payloadTemplate")
    return info.value


def test_unknown_root_is_rejected_with_a_hint() -> None:
    """A misspelt root is a load error that suggests the right one."""
    error = compile_error("${paylod.price}")
    assert ("paylod", True) == (error.variable, "did you mean 'payload'?" in error.reason)


def test_unknown_root_in_jinja_expression_is_rejected() -> None:
    """Jinja2 expressions are checked too, not only ``${…}`` paths."""
    assert "price" == compile_error("{{ price * 2 }}").variable


def test_unknown_watcher_key_lists_the_allowed_keys() -> None:
    """``watcher.foo`` is refused with the keys watcher has."""
    error = compile_error("{{ watcher.foo }}")
    assert "watcher has id, skillId, tags, eventName" in error.reason


def test_unknown_watcher_key_in_path_is_rejected() -> None:
    """``${watcher.name}`` is refused at load, naming the variable."""
    assert "watcher.name" == compile_error("${watcher.name}").variable


def test_unknown_event_key_in_subscript_is_rejected() -> None:
    """A constant subscript ``event['kind']`` is checked like ``event.kind``."""
    assert "event.kind" == compile_error("{{ event['kind'] }}").variable


def test_timestamp_has_no_keys() -> None:
    """``timestamp`` is a string: ``${timestamp.date}`` is a load error."""
    assert "timestamp.date" == compile_error("${timestamp.date}").variable


def test_any_path_below_payload_and_previous_is_accepted() -> None:
    """``payload`` and ``previous`` accept any path at load time."""
    compiled = compile_value(["${payload.a.b.0}", "{{ previous.x.y }}"], name="t")
    assert not compiled.is_constant


@pytest.mark.parametrize("name", ["range", "lipsum", "cycler", "joiner", "namespace", "dict", "self", "loop"])
def test_jinja_globals_are_unknown_variables(name: str) -> None:
    """Jinja2's globals (and ``self``, ``loop`` outside a loop) do not exist."""
    assert name == compile_error(f"{{{{ {name} }}}}").variable


@pytest.mark.parametrize(
    "template",
    [
        pytest.param('{% include "x.j2" %}', id="include"),
        pytest.param('{% import "x.j2" as x %}', id="import"),
        pytest.param('{% from "x.j2" import y %}', id="from-import"),
        pytest.param('{% extends "x.j2" %}', id="extends"),
        pytest.param("{% block b %}{% endblock %}", id="block"),
        pytest.param("{% macro m() %}{% endmacro %}", id="macro"),
    ],
)
def test_forbidden_tags_are_rejected_at_load(template: str) -> None:
    """include/import/extends/block/macro are refused when the template is compiled."""
    assert "is not allowed in templates" in compile_error(template).reason


@pytest.mark.parametrize("name", ["attr", "format", "xmlattr", "pprint", "wordwrap"])
def test_filters_outside_the_whitelist_are_rejected(name: str) -> None:
    """Filters that are not on the safe list are unknown at load time."""
    assert f"unknown filter {name!r}" in compile_error(f"{{{{ payload | {name} }}}}").reason


def test_unknown_filter_error_suggests_a_close_one() -> None:
    """A misspelt filter name gets a hint."""
    assert "did you mean 'round'?" in compile_error("{{ payload.x | rund }}").reason


def test_unknown_filter_inside_if_branch_is_still_a_load_error() -> None:
    """Filters in branches that may never run are checked at load too."""
    assert "unknown filter" in compile_error("{% if false %}{{ 1 | nope }}{% endif %}").reason


def test_syntax_error_names_the_line() -> None:
    """A syntax error is a load error with Jinja2's message and the line."""
    error = compile_error("first line\nsecond {{ payload.x + }}")
    assert error.reason.startswith("fire.payloadTemplate: line 2: syntax error:")


def test_empty_dollar_braces_are_invalid() -> None:
    """``${}`` is a load error."""
    assert "'${}' is empty" in compile_error("price ${}").reason


def test_expression_inside_dollar_braces_points_to_jinja_syntax() -> None:
    """Anything in ``${…}`` that is not a path tells the user to use ``{{ }}``."""
    error = compile_error("${payload.price * 2}")
    assert "use {{ payload.price * 2 }} for Jinja2 expressions" in error.reason


def test_filter_inside_dollar_braces_is_rejected() -> None:
    """``${payload.x | upper}`` is not a path."""
    assert "is not a dotted path" in compile_error("${payload.x | upper}").reason


def test_empty_path_segment_is_rejected() -> None:
    """``${payload..x}`` has an empty segment: a load error."""
    assert "empty segment" in compile_error("${payload..x}").reason


def test_unclosed_dollar_brace_is_rejected() -> None:
    """``${payload.x`` without ``}`` is a load error, not literal text."""
    assert "without a closing '}'" in compile_error("cost ${payload.x").reason


def test_loop_variable_shadowing_a_root_may_use_any_key() -> None:
    """``{% for event in … %}{{ event.type }}`` uses the loop variable, not the root."""
    template = "{% for event in payload.events %}{{ event.type }}{% endfor %}"
    assert not compile_value(template, name="t").is_constant


def test_dollar_path_to_loop_variable_is_accepted() -> None:
    """``${item.name}`` inside a loop over ``item`` resolves the loop variable."""
    compiled = compile_text("{% for item in payload.l %}${item.n},{% endfor %}", name="t")
    assert "1,2," == compiled.render({"payload": {"l": [{"n": 1}, {"n": 2}]}})


def test_error_names_the_key_path_inside_the_template() -> None:
    """Errors in nested strings name the key path (``fire.payloadTemplate.a[1]``)."""
    error = compile_error({"a": ["ok", "${nope}"]})
    assert error.reason.startswith("fire.payloadTemplate.a[1]: unknown variable 'nope'")


def test_non_json_value_is_rejected() -> None:
    """A value that is not JSON-like (a set) cannot be a template."""
    assert "is not a JSON value" in compile_error({"a": {1, 2}}).reason


def test_non_string_object_key_is_rejected() -> None:
    """Object keys of a template must be strings."""
    assert "object keys must be strings" in compile_error({1: "x"}).reason


def test_message_template_must_be_a_string() -> None:
    """``compile_text`` refuses a non-string with a TemplateError."""
    with pytest.raises(TemplateError):
        compile_text(["not", "text"], name="fire.messageTemplate")  # type: ignore[arg-type]


def test_message_template_checks_variables() -> None:
    """Text templates are checked at load like value templates."""
    with pytest.raises(TemplateError) as info:
        compile_text("Alert: {{ trigger.severity }}", name="fire.messageTemplate")
    assert "trigger.severity" == info.value.variable


def test_self_is_refused_even_when_assigned() -> None:
    """``self`` (Jinja2's template reference) is refused even if the template sets it."""
    assert "self" == compile_error("{% if false %}{% set self = 1 %}{% endif %}{{ self }}").variable


UNDECLARED_CASES = [
    "{{ x }}",
    "{% set x = 1 %}{{ x }}",
    "{{ x }}{% set x = 1 %}",
    "{% set x = x + 1 %}",
    "{% for a, b in items %}{{ a }}{{ b }}{{ loop.index }}{% endfor %}{{ a }}",
    "{% for a in items recursive %}{{ loop(a.children) }}{% endfor %}",
    "{% with y = payload %}{{ y.z }}{% endwith %}{{ y }}",
    "{% set ns = namespace(n=0) %}{% set ns.n = 1 %}",
    "{% set other.n = 1 %}",
    "{% set t %}{{ payload }}{% endset %}{{ t }}",
    "{% filter upper %}{{ v }}{% endfilter %}",
    "{{ range(3) }}{{ caller }}{{ varargs }}",
    "{% if a %}{% set b = 1 %}{% endif %}{{ b }}",
    "{{ payload | map(attribute='x') | list }}{{ q is defined }}",
]


@pytest.mark.parametrize("source", UNDECLARED_CASES)
def test_unknown_variables_are_the_ones_jinja_calls_undeclared(source: str) -> None:
    """The one-walk check reports the names ``meta.find_undeclared_variables`` reports."""
    from jinja2 import meta, nodes

    from sentinel_hooks.core.templates.render import _environment
    from sentinel_hooks.core.templates.source import bound_and_unbound

    env = _environment()
    bound, unbound = bound_and_unbound(list(env.parse(source).find_all(nodes.Node)))
    assert meta.find_undeclared_variables(env.parse(source)) - bound == unbound


@pytest.mark.parametrize(
    "template",
    [
        "{% for loop in payload.items %}{{ loop }}{% endfor %}",
        "{% for x in payload.items %}{% set loop = 1 %}{{ x }}{% endfor %}",
    ],
)
def test_assigning_loop_in_a_for_loop_is_refused_at_load(template: str) -> None:
    """Jinja2's code generator refuses it; code is generated at the first render, so the
    load-time check must refuse it first, or the error would surface only when a watcher fires."""
    assert "cannot assign to 'loop'" in compile_error(template).reason


def test_a_template_renders_the_same_on_its_first_and_later_renders() -> None:
    """Code is generated at the first render (loading only parses and checks); later renders
    reuse it and see their own values."""
    compiled = compile_text("{% for x in payload.xs %}{{ x }},{% endfor %}", name="fire.messageTemplate")
    assert ["1,2,", "3,", "1,2,"] == [
        compiled.render({"payload": {"xs": xs}}) for xs in ([1, 2], [3], [1, 2])
    ]


@pytest.mark.parametrize(
    ("template", "variable"),
    [
        pytest.param("${watcher.id.length}", "watcher.id.length", id="placeholder"),
        pytest.param("{{ watcher.id.length }}", "watcher.id.length", id="expression"),
        pytest.param("{{ watcher['eventName'].upper() }}", "watcher.eventName.upper", id="method"),
        pytest.param("${trigger.priority.level}", "trigger.priority.level", id="trigger"),
        pytest.param("n={{ event.name.size }}", "event.name.size", id="in-text"),
        pytest.param("${watcher.tags.first}", "watcher.tags.first", id="array-key"),
        pytest.param("${watcher.tags.0.x}", "watcher.tags.0.x", id="below-an-item"),
    ],
)
def test_path_below_a_known_string_is_rejected(template: str, variable: str) -> None:
    """A key below a known variable that holds a string (or below a tag) is a load error naming it."""
    assert variable == compile_error(template).variable


def test_path_below_a_known_string_suggests_the_filter() -> None:
    """``${watcher.id.length}`` says what watcher.id is and suggests ``| length``."""
    expected = (
        "fire.payloadTemplate: unknown variable 'watcher.id.length': watcher.id is a string and has no "
        "key 'length' (did you mean the filter {{ watcher.id | length }}?)"
    )
    assert expected == compile_error("${watcher.id.length}").reason


@pytest.mark.parametrize(
    "template",
    ["${watcher.tags.0}", "{{ watcher.tags[1] }}", "{{ watcher.id[0] }}", "{{ watcher.id[1:3] }}"],
)
def test_items_of_tags_and_characters_are_accepted(template: str) -> None:
    """Indices into ``watcher.tags`` and subscripts of a string are valid paths."""
    assert not compile_value(template, name="t").is_constant
