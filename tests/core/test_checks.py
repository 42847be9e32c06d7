"""The compiled checks agree with a straightforward evaluation of SPEC §4 on random input.

``apply_operator`` below is that reading, operator by operator, from the JSON comparisons of
``core.operators``; ``core.checks`` is the only reading in the package.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any, get_args

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sentinel_hooks.canonical import compare_numbers
from sentinel_hooks.core.checks import evaluate, holds
from sentinel_hooks.core.conditions import (
    AllGroup,
    AnyGroup,
    Condition,
    ConditionNode,
    Op,
    compile_pattern,
)
from sentinel_hooks.core.operators import as_number, changed, json_equal, regex_search
from sentinel_hooks.core.paths import MISSING, parse_path, resolve

KEYS = ["a", "b", "0", "1", "x-y"]
PATTERNS = ["a", "^b", "(?i)X|y", r"\d+", "", "é", "[^a]", "a$", r"\x{FFFD}"]
EXACT_EDGES = [2**53, 2**53 + 1, -(2**53) - 1, 2**64, 10**23, 10**30, 0, 1, -1, 2000]
FLOAT_EDGES = [1e23, 1e30, 9007199254740992.0, 9007199254740994.0, 0.1, -0.0, 2000.0, 1999.5, 5e-324]
NUMERIC_TEXT = [
    "42",
    "-1.5",
    "1e3",
    "2000",
    "1e23",
    "0.1",
    "9007199254740993",
    " 42 ",
    "0x10",
    "NaN",
    "01",
    "-0",
]


def numbers() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.integers(),
        st.sampled_from(EXACT_EDGES).flatmap(lambda n: st.sampled_from([n, n + 1, n - 1, -n])),
        st.floats(allow_nan=False, allow_infinity=False),
        st.sampled_from(FLOAT_EDGES),
        st.decimals(allow_nan=False, allow_infinity=False, places=3),
    )


def scalars(*, non_finite: bool = True) -> st.SearchStrategy[Any]:
    """Observed scalars; ``non_finite=False`` for condition values (NaN and infinities refused at load)."""
    odd = [float("nan"), float("inf"), -float("inf"), Decimal("NaN")] if non_finite else [None]
    return st.one_of(
        st.none(),
        st.booleans(),
        numbers(),
        st.sampled_from(odd),
        st.text(max_size=6),
        st.sampled_from(KEYS + NUMERIC_TEXT + ["\ud800", "a\udc00b", "é", "Xb1"]),
    )


def json_values(*, non_finite: bool = True) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars(non_finite=non_finite),
        lambda children: st.one_of(
            st.lists(children, max_size=3),
            st.dictionaries(st.sampled_from(KEYS), children, max_size=4),
        ),
        max_leaves=12,
    )


def paths() -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(KEYS), min_size=1, max_size=3).map(".".join)


def conditions() -> st.SearchStrategy[Condition]:
    def with_value(op: str) -> st.SearchStrategy[Any]:
        if op in ("exists", "absent", "changed"):
            return st.one_of(st.none(), scalars(non_finite=False))
        if op in ("gt", "gte", "lt", "lte"):
            return st.one_of(numbers(), st.sampled_from(NUMERIC_TEXT[:7]))
        if op in ("in", "notIn"):
            return st.lists(st.one_of(scalars(non_finite=False), json_values(non_finite=False)), max_size=4)
        if op == "matches":
            return st.sampled_from(PATTERNS)
        if op in ("startsWith", "endsWith"):
            return st.one_of(st.text(max_size=3), st.sampled_from(["a", "é", "\ud800"]))
        return json_values(non_finite=False).filter(lambda value: value is not None)  # eq, neq, contains

    ops = st.sampled_from(get_args(Op))
    return st.tuples(paths(), ops).flatmap(
        lambda pair: with_value(pair[1]).map(lambda value: Condition(path=pair[0], op=pair[1], value=value))
    )


def nodes() -> st.SearchStrategy[ConditionNode]:
    return st.recursive(
        conditions(),
        lambda children: st.one_of(
            st.lists(children, min_size=1, max_size=3).map(lambda kids: AnyGroup(any=kids)),
            st.lists(children, min_size=1, max_size=3).map(lambda kids: AllGroup(all=kids)),
        ),
        max_leaves=5,
    )


def observations() -> st.SearchStrategy[Any]:
    """Mostly objects keyed like the paths, so paths resolve often; sometimes anything."""
    return st.one_of(st.dictionaries(st.sampled_from(KEYS), json_values(), max_size=5), json_values())


def twins(value: Any) -> list[Any]:
    """Numbers equal or next to ``value`` in the other types (and as a numeric string)."""
    found = [value, str(value)]
    if isinstance(value, int):
        found += [value + 1, value - 1]
    number = float(value)
    if math.isfinite(number):
        found += [
            number,
            math.nextafter(number, math.inf),
            math.nextafter(number, -math.inf),
            Decimal(repr(number)),
        ]
        found += [int(number), int(number) + 1] if number == int(number) else []
    return found


def number_pairs() -> st.SearchStrategy[tuple[Any, Any]]:
    return numbers().flatmap(
        lambda value: st.tuples(st.just(value), st.sampled_from(twins(value)) | numbers())
    )


def previous_of(observation: Any) -> st.SearchStrategy[Any]:
    """No previous observation, another one, the same one, or the same with some keys changed."""
    changes = st.dictionaries(st.sampled_from(KEYS), json_values(), max_size=2)
    options = [st.just(MISSING), observations(), st.just(copy.deepcopy(observation))]
    if isinstance(observation, dict):
        options.append(changes.map(lambda changed: {**copy.deepcopy(observation), **changed}))
    return st.one_of(*options)


def _compare(actual: Any, expected: Any, accept: Callable[[int], bool]) -> bool:
    """Whether both sides are numbers and their order satisfies ``accept``."""
    left, right = as_number(actual), as_number(expected)
    return left is not None and right is not None and accept(compare_numbers(left, right))


def _contains(actual: Any, expected: Any) -> bool:
    """Substring of a string, member of an array, key of an object; false for anything else."""
    if isinstance(actual, str):
        return isinstance(expected, str) and expected in actual
    if isinstance(actual, list | tuple):
        return any(json_equal(member, expected) for member in actual)
    if isinstance(actual, dict):
        return isinstance(expected, str) and expected in actual
    return False


def _is_in(actual: Any, expected: Any) -> bool:
    return isinstance(expected, list | tuple) and any(json_equal(actual, member) for member in expected)


def _present(actual: Any) -> bool:
    return actual is not MISSING and actual is not None


OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": json_equal,
    "neq": lambda actual, expected: not json_equal(actual, expected),
    "gt": lambda actual, expected: _compare(actual, expected, lambda order: order > 0),
    "gte": lambda actual, expected: _compare(actual, expected, lambda order: order >= 0),
    "lt": lambda actual, expected: _compare(actual, expected, lambda order: order < 0),
    "lte": lambda actual, expected: _compare(actual, expected, lambda order: order <= 0),
    "exists": lambda actual, _: _present(actual),
    "absent": lambda actual, _: not _present(actual),
    "contains": _contains,
    "in": _is_in,
    "notIn": lambda actual, expected: not _is_in(actual, expected),
    "startsWith": lambda actual, expected: (
        isinstance(actual, str) and isinstance(expected, str) and actual.startswith(expected)
    ),
    "endsWith": lambda actual, expected: (
        isinstance(actual, str) and isinstance(expected, str) and actual.endswith(expected)
    ),
}


def apply_operator(op: str, actual: Any, expected: Any) -> bool:
    """SPEC §4's value operator ``op`` (all but ``matches`` and ``changed``), the plain way."""
    return OPERATORS[op](actual, expected)


def reference_leaf(condition: Condition, observation: Any, previous: Any) -> bool:
    """SPEC §4 the plain way: resolve the path, then the operator of core.operators."""
    segments = parse_path(condition.path)
    actual = resolve(observation, segments)
    if condition.op == "changed":
        return previous is not MISSING and changed(actual, resolve(previous, segments))
    if condition.op == "matches":
        return regex_search(compile_pattern(condition.value), actual)
    return apply_operator(condition.op, actual, condition.value)


def reference(node: ConditionNode, observation: Any, previous: Any) -> bool:
    if isinstance(node, Condition):
        return reference_leaf(node, observation, previous)
    if isinstance(node, AnyGroup):
        return any(reference(child, observation, previous) for child in node.any)
    return all(reference(child, observation, previous) for child in node.all)


def leaves(node: ConditionNode) -> list[Condition]:
    if isinstance(node, Condition):
        return [node]
    return [
        leaf for child in (node.any if isinstance(node, AnyGroup) else node.all) for leaf in leaves(child)
    ]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(nodes(), max_size=3),
    st.sampled_from(["all", "any"]),
    observations().flatmap(lambda observation: st.tuples(st.just(observation), previous_of(observation))),
)
def test_compiled_conditions_agree_with_reference(
    written: list[ConditionNode], match: Any, observations: tuple[Any, Any]
) -> None:
    """holds() and evaluate() give the reference's answer, and every leaf the reference's result."""
    observation, previous = observations
    outcomes = [reference(node, observation, previous) for node in written]
    expected = (any(outcomes) if match == "any" else all(outcomes)) if outcomes else True
    evaluation = evaluate(written, match, observation, previous)
    expected_leaves = [
        reference_leaf(leaf, observation, previous) for node in written for leaf in leaves(node)
    ]
    assert (expected, expected, expected_leaves) == (
        holds(written, match, observation, previous),
        evaluation.matched,
        [result.result for result in evaluation.results],
    )


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["eq", "neq", "gt", "gte", "lt", "lte"]), number_pairs())
def test_numbers_compare_exactly_on_fast_paths(op: str, pair: tuple[Any, Any]) -> None:
    """Int, float and Decimal comparisons (around 2**53, 1e23, …) match the exact operator."""
    value, actual = pair
    condition = Condition(path="x", op=op, value=value)
    assert apply_operator(op, actual, value) == condition.check({"x": actual}, MISSING)


@given(st.sampled_from(PATTERNS), st.text(max_size=8) | st.sampled_from(["\ud800", "a\udc00b", "ab\ufffd"]))
def test_matches_agrees_with_re2_search(pattern: str, text: str) -> None:
    """The boolean RE2 match agrees with google-re2's search, lone surrogates included."""
    condition = Condition(path="x", op="matches", value=pattern)
    assert regex_search(compile_pattern(pattern), text) == condition.check({"x": text}, MISSING)


@pytest.mark.parametrize(
    ("op", "value", "actual"),
    [
        ("eq", 1e23, 10**23),
        ("gte", 10**23, 1e23),
        ("lt", 9007199254740993, 9007199254740992.0),
        ("eq", "1e23", 10**23),
        ("gt", 0.1, Decimal("0.1")),
        ("lte", "-3", -3.0),
    ],
)
def test_numbers_where_python_and_the_exact_reading_differ(op: str, value: Any, actual: Any) -> None:
    """Where Python's int/float comparison is not the decimal reading, the exact one wins."""
    assert apply_operator(op, actual, value) == Condition(path="x", op=op, value=value).check(
        {"x": actual}, MISSING
    )


def test_compiled_check_is_not_part_of_the_model() -> None:
    """A condition that has been evaluated still equals, dumps and hashes like a fresh one."""
    used = Condition(path="a", op="eq", value=1)
    assert used.check({"a": 1}, MISSING)
    fresh = Condition(path="a", op="eq", value=1)
    assert (fresh, fresh.model_dump(), hash(fresh)) == (used, used.model_dump(), hash(used))


def test_check_is_compiled_once() -> None:
    """The same check object serves every evaluation of a condition or a group."""
    group = AllGroup(all=[Condition(path="a", op="exists")])
    assert (group.check, group.all[0].check) == (group.check, group.all[0].check)
    assert group.check is group.check
