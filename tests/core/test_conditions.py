"""Tests for condition evaluation: every operator's exact semantics (SPEC §4) and combination."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from sentinel_hooks.core.checks import ConditionResult, evaluate
from sentinel_hooks.core.conditions import AllGroup, AnyGroup, Condition, ConditionNode
from sentinel_hooks.core.paths import MISSING

BIG = 2**64
ABSENT = object()  # marks a row whose observation has no "x" at all


def evaluate_one(condition: Condition, observation: Any, previous: Any = MISSING) -> ConditionResult:
    """The result of one condition, as ``evaluate`` reports it."""
    (result,) = evaluate([condition], "all", observation, previous).results
    return result


def _check(op: str, value: Any, actual: Any, previous: Any = MISSING) -> bool:
    """Evaluate ``{path: x, op, value}`` against ``{"x": actual}`` (or ``{}`` when ABSENT)."""
    condition = Condition(path="x", op=op, value=value)
    observation = {} if actual is ABSENT else {"x": actual}
    return evaluate_one(condition, observation, previous).result


EQUALITY = [
    pytest.param(100, 100.0, True, id="int-equals-integral-float"),
    pytest.param(100.0, 100, True, id="float-equals-int"),
    pytest.param(1, "1", False, id="int-not-string"),
    pytest.param("1", 1, False, id="string-not-int"),
    pytest.param(1, True, False, id="true-not-1"),
    pytest.param(True, 1, False, id="1-not-true"),
    pytest.param(0, False, False, id="false-not-0"),
    pytest.param(False, False, True, id="false-equals-false"),
    pytest.param(0, None, False, id="null-not-0"),
    pytest.param(1, ABSENT, False, id="missing-equals-nothing"),
    pytest.param("", ABSENT, False, id="missing-not-empty-string"),
    pytest.param(BIG, BIG + 1, False, id="2-64-vs-2-64-plus-1"),
    pytest.param(BIG + 1, BIG + 1, True, id="big-int-equal"),
    pytest.param(10**30, 1e30, True, id="10-30-int-vs-float"),
    pytest.param(0.1, Decimal("0.1"), True, id="float-by-shortest-repr"),
    pytest.param("1e3", "1000", False, id="strings-compare-as-strings"),
    pytest.param("café", "café", True, id="unicode-equal"),
    pytest.param("café", "cafe\u0301", False, id="combining-form-differs"),
    pytest.param("🚀", "🚀", True, id="emoji-equal"),
    pytest.param({"a": 1, "b": [1, {"c": 2}]}, {"b": [1, {"c": 2.0}], "a": 1}, True, id="objects-deep-equal"),
    pytest.param({"a": 1}, {"a": 1, "b": None}, False, id="object-extra-null-key"),
    pytest.param({"a": 1}, {"a": True}, False, id="object-bool-vs-int-deep"),
    pytest.param([1, 2], [2, 1], False, id="array-order-matters"),
    pytest.param([1, [2, [3]]], [1.0, [2, [3.0]]], True, id="nested-arrays-equal"),
    pytest.param([True], [1], False, id="array-bool-vs-int"),
    pytest.param([1], [1, 1], False, id="array-length-differs"),
    pytest.param([], {}, False, id="empty-array-not-empty-object"),
]


@pytest.mark.parametrize(("value", "actual", "expected"), EQUALITY)
def test_eq(value: Any, actual: Any, expected: bool) -> None:
    """eq is JSON equality: no coercion, exact numbers, deep objects and arrays."""
    assert expected == _check("eq", value, actual)


@pytest.mark.parametrize(("value", "actual", "expected"), EQUALITY)
def test_neq_is_negation_of_eq(value: Any, actual: Any, expected: bool) -> None:
    """neq is exactly not-eq, so a missing path is neq everything."""
    assert (not expected) == _check("neq", value, actual)


NUMERIC = [
    pytest.param("gt", 3, 5, True, id="gt-true"),
    pytest.param("gt", 3, 3, False, id="gt-equal-false"),
    pytest.param("gte", 3, 3, True, id="gte-equal"),
    pytest.param("lt", 3, 2.5, True, id="lt-float"),
    pytest.param("lte", 100, 100.0, True, id="lte-int-vs-float"),
    pytest.param("gte", 100.0, 100, True, id="gte-float-vs-int"),
    pytest.param("gt", 41, "42", True, id="numeric-string-actual"),
    pytest.param("lt", "41", 40, True, id="numeric-string-value"),
    pytest.param("gt", "9", "10", True, id="both-strings-numeric-not-lexical"),
    pytest.param("gte", 1000, "1e3", True, id="exponent-string"),
    pytest.param("lt", 0, "-1.5", True, id="negative-fraction-string"),
    pytest.param("gt", 0, "-0", False, id="negative-zero-string"),
    pytest.param("gt", BIG, BIG + 1, True, id="2-64-plus-1-gt-2-64"),
    pytest.param("gt", str(BIG), str(BIG + 1), True, id="big-ints-as-strings"),
    pytest.param("lt", BIG + 1, str(BIG), True, id="big-int-vs-string"),
    pytest.param("gt", "999999999999999999999999999999", 10**30, True, id="10-30-int"),
    pytest.param("gte", 1e30, str(10**30), True, id="10-30-string-vs-float"),
    pytest.param("gte", "0.1", 0.1, True, id="float-is-its-repr"),
    pytest.param("gt", "0.1", 0.1, False, id="float-not-above-its-repr"),
    pytest.param("gt", 10**30, "1e999999", True, id="huge-exponent-string"),
    pytest.param("gt", "1e999999", "1e999999999999999999999", True, id="beyond-decimal-limits"),
    pytest.param("lt", 0, "-1e999999999999999999999", True, id="huge-negative"),
    pytest.param("gt", 0, "1e-999999999999999999999", True, id="tiny-positive"),
    pytest.param("gt", 1, "1e" + "9" * 5000, True, id="5000-digit-exponent"),
    pytest.param("gt", 0, None, False, id="null-not-coerced"),
    pytest.param("lt", 1, None, False, id="null-not-zero"),
    pytest.param("lt", 1, ABSENT, False, id="missing"),
    pytest.param("gt", 0, True, False, id="true-not-a-number"),
    pytest.param("lt", 1, False, False, id="false-not-a-number"),
    pytest.param("lt", 1, [], False, id="array"),
    pytest.param("lt", 1, {}, False, id="object"),
    pytest.param("gt", 1, " 42 ", False, id="padded-string"),
    pytest.param("gt", 1, "0x10", False, id="hex-string"),
    pytest.param("gt", 1, "NaN", False, id="nan-string"),
    pytest.param("gt", 1, "Infinity", False, id="infinity-string"),
    pytest.param("gt", 0, "+1", False, id="plus-sign"),
    pytest.param("gt", 0, "01", False, id="leading-zero"),
    pytest.param("gt", 1, "٣", False, id="non-ascii-digit"),
    pytest.param("gt", 1, "abc", False, id="word"),
    pytest.param("gt", 0, float("nan"), False, id="nan-float"),
    pytest.param("gt", 0, float("inf"), False, id="infinite-float"),
    pytest.param("gt", 0, Decimal("1.5"), True, id="decimal-actual"),
]


@pytest.mark.parametrize(("op", "value", "actual", "expected"), NUMERIC)
def test_numeric_operator(op: str, value: Any, actual: Any, expected: bool) -> None:
    """Numeric ops compare numbers and numeric strings exactly; anything else is false."""
    assert expected == _check(op, value, actual)


@pytest.mark.parametrize(
    ("op", "actual", "expected"),
    [
        pytest.param("exists", 0, True, id="exists-zero"),
        pytest.param("exists", "", True, id="exists-empty-string"),
        pytest.param("exists", False, True, id="exists-false"),
        pytest.param("exists", [], True, id="exists-empty-array"),
        pytest.param("exists", {}, True, id="exists-empty-object"),
        pytest.param("exists", None, False, id="exists-null-is-absent"),
        pytest.param("exists", ABSENT, False, id="exists-missing"),
        pytest.param("absent", None, True, id="absent-null"),
        pytest.param("absent", ABSENT, True, id="absent-missing"),
        pytest.param("absent", 0, False, id="absent-zero-exists"),
        pytest.param("absent", "", False, id="absent-empty-string-exists"),
    ],
)
def test_presence_operator(op: str, actual: Any, expected: bool) -> None:
    """exists/absent treat null as absent and every other value as present."""
    assert expected == _check(op, None, actual)


def test_exists_ignores_a_given_value() -> None:
    """A value given to exists is ignored."""
    assert True is _check("exists", 5, 0)


@pytest.mark.parametrize(
    ("value", "actual", "expected"),
    [
        pytest.param("café", "un café au lait", True, id="substring-unicode"),
        pytest.param("café", "un cafe\u0301", False, id="substring-combining-differs"),
        pytest.param("🚀", "go 🚀 now", True, id="substring-emoji"),
        pytest.param("", "abc", True, id="empty-substring"),
        pytest.param("ABC", "abc", False, id="substring-case-sensitive"),
        pytest.param(1, "a1b", False, id="string-with-number-value"),
        pytest.param(1, [1, 2], True, id="array-member"),
        pytest.param(1, [1.0], True, id="array-member-integral-float"),
        pytest.param(1, ["1"], False, id="array-string-not-number"),
        pytest.param(1, [True], False, id="array-bool-not-number"),
        pytest.param("a", ["abc"], False, id="array-no-substring"),
        pytest.param([1, 2], [[1, 2], 3], True, id="array-contains-array"),
        pytest.param({"a": 1}, [{"a": 1.0}], True, id="array-contains-object"),
        pytest.param("a", {"a": 1}, True, id="object-key"),
        pytest.param("b", {"a": 1}, False, id="object-absent-key"),
        pytest.param(1, {"1": 1}, False, id="object-non-string-value"),
        pytest.param(1, 1, False, id="number"),
        pytest.param("a", None, False, id="null"),
        pytest.param("a", ABSENT, False, id="missing"),
        pytest.param("t", True, False, id="boolean"),
    ],
)
def test_contains(value: Any, actual: Any, expected: bool) -> None:
    """contains: substring, array membership (eq rules), object key; false otherwise."""
    assert expected == _check("contains", value, actual)


@pytest.mark.parametrize(
    ("value", "actual", "expected"),
    [
        pytest.param([1, 2], 1, True, id="member"),
        pytest.param([1, 2], 1.0, True, id="integral-float-member"),
        pytest.param([1], "1", False, id="string-not-number"),
        pytest.param([1], True, False, id="bool-not-number"),
        pytest.param(["café"], "cafe\u0301", False, id="combining-form-differs"),
        pytest.param([None, 1], None, True, id="null-in-list-with-null"),
        pytest.param([0], None, False, id="null-not-0"),
        pytest.param([{"a": [1]}], {"a": [1.0]}, True, id="deep-object"),
        pytest.param([1], ABSENT, False, id="missing"),
        pytest.param([], 1, False, id="empty-list"),
        pytest.param([str(BIG + 1)], BIG + 1, False, id="big-int-not-its-string"),
    ],
)
def test_in_and_not_in(value: list[Any], actual: Any, expected: bool) -> None:
    """in is eq-membership in the list; notIn is its negation (a missing value is notIn)."""
    assert (expected, not expected) == (_check("in", value, actual), _check("notIn", value, actual))


@pytest.mark.parametrize(
    ("op", "value", "actual", "expected"),
    [
        pytest.param("startsWith", "caf", "café", True, id="starts-unicode"),
        pytest.param("endsWith", "fé", "café", True, id="ends-unicode"),
        pytest.param("endsWith", "e", "café", False, id="composed-e-acute-is-not-e"),
        pytest.param("endsWith", "\u0301", "cafe\u0301", True, id="ends-combining-mark"),
        pytest.param("startsWith", "🚀", "🚀 launch", True, id="starts-emoji"),
        pytest.param("startsWith", "", "abc", True, id="empty-prefix"),
        pytest.param("startsWith", "1", 123, False, id="number-is-not-a-string"),
        pytest.param("startsWith", "a", ["a"], False, id="array-is-not-a-string"),
        pytest.param("endsWith", "l", None, False, id="null"),
        pytest.param("endsWith", "a", ABSENT, False, id="missing"),
    ],
)
def test_starts_and_ends_with(op: str, value: str, actual: Any, expected: bool) -> None:
    """startsWith/endsWith apply to strings only."""
    assert expected == _check(op, value, actual)


@pytest.mark.parametrize(
    ("pattern", "actual", "expected"),
    [
        pytest.param(r"disk\s+full", "error: disk  full", True, id="search-unanchored"),
        pytest.param("^abc", "xabc", False, id="anchor-respected"),
        pytest.param("abc$", "xabc", True, id="end-anchor"),
        pytest.param("(?i)error", "ERROR", True, id="inline-flag"),
        pytest.param("^caf.$", "café", True, id="dot-matches-one-code-point"),
        pytest.param("^.$", "🚀", True, id="emoji-one-code-point"),
        pytest.param(r"^\p{L}+$", "ñandú", True, id="unicode-class"),
        pytest.param("a.b", "a\ud800b", True, id="lone-surrogate-searched-safely"),
        pytest.param("1", 123, False, id="number-is-not-a-string"),
        pytest.param("a", ["a"], False, id="array-is-not-a-string"),
        pytest.param("null", None, False, id="null"),
        pytest.param(".*", ABSENT, False, id="missing"),
    ],
)
def test_matches(pattern: str, actual: Any, expected: bool) -> None:
    """matches is an unanchored RE2 search on strings only."""
    assert expected == _check("matches", pattern, actual)


def test_matches_is_linear_on_catastrophic_pattern() -> None:
    """A pattern that backtracks exponentially elsewhere is linear under RE2."""
    assert False is _check("matches", "^(a+)+$", "a" * 50_000 + "!")


@pytest.mark.parametrize(
    ("before", "now", "expected"),
    [
        pytest.param(1, 1, False, id="same"),
        pytest.param(1, 2, True, id="different"),
        pytest.param(1, 1.0, False, id="int-vs-integral-float"),
        pytest.param(1, "1", True, id="number-vs-string"),
        pytest.param({"a": 1, "b": 2}, {"b": 2, "a": 1}, False, id="key-order-irrelevant"),
        pytest.param([1, 2], [2, 1], True, id="array-order-matters"),
        pytest.param(None, ABSENT, False, id="null-to-missing"),
        pytest.param(ABSENT, None, False, id="missing-to-null"),
        pytest.param(ABSENT, ABSENT, False, id="missing-to-missing"),
        pytest.param(ABSENT, 0, True, id="missing-to-zero"),
        pytest.param(0, ABSENT, True, id="zero-to-missing"),
        pytest.param(False, None, True, id="false-to-null"),
        pytest.param(BIG, BIG + 1, True, id="big-int-step"),
        pytest.param("café", "cafe\u0301", True, id="combining-form"),
    ],
)
def test_changed(before: Any, now: Any, expected: bool) -> None:
    """changed compares canonical JSON with the previous observation; missing equals null."""
    previous = {} if before is ABSENT else {"x": before}
    assert expected == _check("changed", None, now, previous)


def test_changed_first_observation_only_sets_baseline() -> None:
    """With no previous observation, changed is false."""
    assert False is _check("changed", None, 1, MISSING)


def test_changed_previous_null_observation_is_a_baseline() -> None:
    """A previous observation that was JSON null is a real baseline (the path was missing)."""
    assert True is _check("changed", None, 1, None)


def _cond(path: str, op: str, value: Any = None) -> Condition:
    return Condition(path=path, op=op, value=value)


OBSERVATION = {"items": [{"name": "a"}, {"name": "b"}], "byIndex": {"0": "zero"}, "n": 5}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param("items.0.name", "a", id="dotted-index"),
        pytest.param("items[1].name", "b", id="bracket-index"),
        pytest.param("byIndex.0", "zero", id="dict-key-0"),
    ],
)
def test_eq_follows_path(path: str, expected: str) -> None:
    """Conditions resolve dotted and bracket paths before comparing."""
    assert True is evaluate_one(_cond(path, "eq", expected), OBSERVATION).result


def test_negative_index_is_missing() -> None:
    """items.-1 is the key '-1', missing on an array (so exists is false)."""
    assert ConditionResult("items.-1", "exists", None, None, False, True) == evaluate_one(
        _cond("items.-1", "exists"), OBSERVATION
    )


def test_result_reports_resolved_value() -> None:
    """A result carries the path, op, value and the resolved actual value."""
    assert ConditionResult("n", "gt", 3, 5, True, False) == evaluate_one(_cond("n", "gt", 3), OBSERVATION)


def test_result_null_is_not_missing() -> None:
    """A present null has actual None and missing False."""
    expected = (None, False)
    assert expected == _actual_and_missing(evaluate_one(_cond("x", "absent"), {"x": None}))


def _actual_and_missing(result: ConditionResult) -> tuple[Any, bool]:
    return result.actual, result.missing


def test_empty_conditions_match_everything() -> None:
    """An empty list matches with both combinators and yields no results."""
    expected: list[tuple[bool, list[ConditionResult]]] = [(True, []), (True, [])]
    assert expected == [(e.matched, e.results) for e in (evaluate([], "all", {}), evaluate([], "any", None))]


@pytest.mark.parametrize(
    ("match", "expected"),
    [pytest.param("all", False, id="all-needs-every"), pytest.param("any", True, id="any-one")],
)
def test_match_combines_top_level(match: Any, expected: bool) -> None:
    """match: all needs every condition, match: any at least one."""
    nodes = [_cond("n", "eq", 5), _cond("n", "eq", 6)]
    assert expected == evaluate(nodes, match, OBSERVATION).matched


def test_every_leaf_evaluated_in_document_order() -> None:
    """Results list every leaf, nested ones included, in document order — no short-circuit."""
    nodes: list[ConditionNode] = [
        _cond("n", "eq", 6),
        AnyGroup(any=[_cond("n", "gt", 1), AllGroup(all=[_cond("n", "lt", 2), _cond("a", "absent")])]),
    ]
    evaluation = evaluate(nodes, "all", OBSERVATION)
    expected = [("n", "eq", False), ("n", "gt", True), ("n", "lt", False), ("a", "absent", True)]
    assert expected == [(r.path, r.op, r.result) for r in evaluation.results]


@pytest.mark.parametrize(
    ("group", "expected"),
    [
        pytest.param(AnyGroup(any=[_cond("n", "eq", 1), _cond("n", "eq", 5)]), True, id="any-one"),
        pytest.param(AnyGroup(any=[_cond("n", "eq", 1), _cond("n", "eq", 2)]), False, id="any-none"),
        pytest.param(AllGroup(all=[_cond("n", "gt", 1), _cond("n", "lt", 9)]), True, id="all-every"),
        pytest.param(AllGroup(all=[_cond("n", "gt", 1), _cond("n", "lt", 2)]), False, id="all-not"),
        pytest.param(
            AllGroup(all=[AnyGroup(any=[_cond("n", "eq", 5)]), _cond("items", "exists")]),
            True,
            id="nested",
        ),
    ],
)
def test_group_semantics(group: AnyGroup | AllGroup, expected: bool) -> None:
    """any = at least one child true, all = every child true, at any depth."""
    assert expected == evaluate([group], "all", OBSERVATION).matched


@pytest.mark.parametrize(
    "op",
    ["eq", "contains", "changed", "in", "exists"],
)
def test_deeply_nested_observation_does_not_raise(op: str) -> None:
    """Nesting far beyond the recursion limit is evaluated without error."""
    deep: Any = 1
    for _ in range(50_000):
        deep = [deep]
    value = [[1]] if op == "in" else [1]
    condition = _cond("x", op, None if op in ("changed", "exists") else value)
    assert isinstance(evaluate_one(condition, {"x": deep}, {"x": [deep]}).result, bool)
