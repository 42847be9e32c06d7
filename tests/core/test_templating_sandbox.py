"""The template sandbox: no Python internals, no huge values, only TemplateError escapes."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

import sentinel_hooks.core.templates.environment as template_env
import sentinel_hooks.core.templates.render as templating
import sentinel_hooks.core.templates.source as template_source
from sentinel_hooks.core.templates.render import compile_text, compile_value
from sentinel_hooks.errors import TemplateError

CONTEXT: dict[str, Any] = {
    "payload": {"name": "eth", "list": [1, 2], "obj": {"k": "v"}, "n": 7},
    "previous": None,
    "watcher": {"id": "w", "skillId": None, "tags": [], "eventName": "e"},
    "event": {"name": "e"},
    "trigger": {"kind": "edge", "priority": "low"},
    "timestamp": "2026-01-01T00:00:00.000Z",
}


def render_error(template: str) -> TemplateError:
    """The TemplateError raised when compiling or rendering ``template`` as text."""
    with pytest.raises(TemplateError) as info:
        compile_text(template, name="fire.messageTemplate").render(CONTEXT)
    return info.value


@pytest.mark.parametrize(
    "template",
    [
        pytest.param("{{ payload.__class__ }}", id="class-of-payload"),
        pytest.param("{{ payload.name.__class__.__mro__ }}", id="mro"),
        pytest.param("{{ ''.__class__ }}", id="class-of-literal"),
        pytest.param("{{ payload['__class__'] }}", id="subscript-dunder"),
        pytest.param("{{ '{0.__class__}'.format(payload) }}", id="str-format"),
        pytest.param("{{ payload.list.append(3) }}", id="list-method"),
        pytest.param("{{ payload.obj.update({}) }}", id="dict-method"),
        pytest.param("{{ payload.name.upper() }}", id="str-method"),
        pytest.param(
            "{% for x in payload.list %}{{ loop.cycle.__globals__ }}{% endfor %}",
            id="loop-method-globals",
        ),
        pytest.param("{% for x in payload.list %}{{ loop._iterator }}{% endfor %}", id="private"),
        pytest.param("{{ payload | map(attribute='__class__') | list }}", id="map-attribute"),
        pytest.param("{{ environment }}", id="environment"),
        pytest.param("{{ __builtins__ }}", id="builtins"),
    ],
)
def test_sandbox_escape_attempts_fail_with_template_error(template: str) -> None:
    """Python attributes and methods are unreachable: every attempt is a TemplateError."""
    assert isinstance(render_error(template), TemplateError)


def test_mapping_method_names_are_only_keys() -> None:
    """``{{ payload.obj.keys }}`` is the missing key ``keys``, not ``dict.keys``."""
    assert "payload.obj.keys" == render_error("{{ payload.obj.keys }}").variable


def test_big_string_multiplication_is_refused() -> None:
    """``'x' * 10**9`` is refused before the string is built."""
    assert "refused" in render_error("{{ 'x' * 10**9 }}").reason


def test_big_list_multiplication_is_refused() -> None:
    """``[1] * 10**9`` is refused before the list is built."""
    assert "refused" in render_error("{{ [1] * 10**9 }}").reason


def test_huge_power_is_refused() -> None:
    """``9 ** (9 ** 9)`` is refused before it is computed."""
    assert "refused" in render_error("{{ 9 ** (9 ** 9) }}").reason


def test_small_power_is_computed() -> None:
    """Ordinary arithmetic still works."""
    assert "1024" == compile_text("{{ 2 ** 10 }}", name="t").render(CONTEXT)


def test_doubling_with_tilde_is_refused() -> None:
    """``a ~ a`` over the size limit is refused."""
    template = "{% set a = 'x' * 40000 %}{{ a ~ a }}"
    assert "refused" in render_error(template).reason


def test_doubling_with_plus_is_refused() -> None:
    """``a + a`` over the size limit is refused."""
    template = "{% set a = 'x' * 40000 %}{{ a + a }}"
    assert "refused" in render_error(template).reason


def test_join_of_repeated_big_strings_is_refused() -> None:
    """``[a, a] | join`` over the size limit is refused."""
    template = "{% set a = 'x' * 40000 %}{{ [a, a] | join }}"
    assert "refused" in render_error(template).reason


@pytest.mark.parametrize(
    "template",
    [
        pytest.param("{{ 'x' | center(1000000000) }}", id="center"),
        pytest.param("{{ 'x' | indent(1000000000, true) }}", id="indent"),
        pytest.param("{{ ('x' * 1000) | replace('', 'y' * 100) }}", id="replace"),
        pytest.param("{{ [1] | batch(1000000000, 0) | list }}", id="batch"),
        pytest.param("{{ [1] | slice(1000000000) | list }}", id="slice"),
        pytest.param("{{ payload | tojson(indent=100000) }}", id="tojson-indent"),
    ],
)
def test_filters_that_would_build_huge_values_are_refused(template: str) -> None:
    """Width/count arguments that would build a huge value are refused up front."""
    assert "refused" in render_error(template).reason


def test_percent_string_formatting_is_refused() -> None:
    """``'%1000000000s' % x`` cannot build a huge string: ``%`` on strings is refused."""
    assert "refused" in render_error("{{ '%1000000000s' % 'x' }}").reason


def test_rendered_text_over_64_kib_is_refused() -> None:
    """A loop whose output passes 64 KiB is stopped with a TemplateError."""
    template = "{% for i in payload.list %}{{ 'x' * 40000 }}{% endfor %}"
    assert "over 65536 bytes" in render_error(template).reason


def test_rendered_text_limit_counts_utf8_bytes() -> None:
    """40 000 two-byte characters are 80 000 bytes: over the limit."""
    assert "refused" in render_error("{{ 'é' * 40000 }}").reason


def test_typed_string_over_64_kib_is_refused() -> None:
    """An exact ``{{ … }}`` placeholder building a huge string is refused too."""
    with pytest.raises(TemplateError):
        compile_value("{{ 'é' * 40000 }}", name="t").render(CONTEXT)


def test_text_just_under_the_limit_renders() -> None:
    """64 KiB of ASCII is allowed."""
    text = compile_text("{{ 'x' * 65536 }}", name="t").render(CONTEXT)
    assert 65536 == len(text)


def test_nested_loops_run_out_of_budget() -> None:
    """Nested loops over big lists stop at the iteration budget instead of hanging."""
    template = "{% set l = ('x' * 60000) | list %}{% for a in l %}{% for b in l %}{% endfor %}{% endfor %}"
    assert "iterations" in render_error(template).reason


def test_type_error_in_expression_is_a_template_error() -> None:
    """A Python TypeError inside a template surfaces as TemplateError."""
    assert "TypeError" in render_error("{{ payload.n + 'x' }}").reason


def test_zero_division_is_a_template_error() -> None:
    """A ZeroDivisionError inside a template surfaces as TemplateError."""
    assert "ZeroDivisionError" in render_error("{{ payload.n / 0 }}").reason


def test_calling_a_non_callable_is_a_template_error() -> None:
    """Calling a JSON value is a TemplateError, not a foreign exception."""
    assert "not callable" in render_error("{{ payload.obj.k() }}").reason


def test_undefined_inside_typed_list_is_a_template_error() -> None:
    """A typed result containing an undefined value is refused at render."""
    with pytest.raises(TemplateError):
        compile_value("{{ payload.list | map(attribute='x') | list }}", name="t").render(CONTEXT)


def test_missing_root_variable_is_a_template_error() -> None:
    """Rendering without a root the template uses names that root."""
    compiled = compile_text("{{ previous.x }}", name="t")
    with pytest.raises(TemplateError) as info:
        compiled.render({"payload": {}})
    assert "previous" == info.value.variable


@pytest.mark.parametrize("module", [template_env, template_source, templating])
def test_template_modules_do_no_io(module: Any) -> None:
    """The template modules import no aiohttp, redis or sqlite3 (they stay pure)."""
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    imported = {
        name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in (
            [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        )
    }
    assert set() == imported & {"aiohttp", "redis", "sqlite3"}


def test_computed_subscript_never_falls_back_to_a_method() -> None:
    """``payload[k]`` with ``k = 'keys'`` and no such key is undefined, not ``dict.keys``."""
    assert "keys" == render_error("{% set k = 'keys' %}{{ payload[k] }}").variable
