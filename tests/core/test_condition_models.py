"""Tests for the condition models: load-time validation, groups, schema, robust evaluation."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from sentinel_hooks.canonical import parse_number
from sentinel_hooks.core.checks import evaluate
from sentinel_hooks.core.conditions import AllGroup, AnyGroup, Condition, ConditionNode, count_conditions

NODES = TypeAdapter(list[ConditionNode])
ALL_OPS = [
    "eq", "neq", "gt", "gte", "lt", "lte", "exists", "absent", "contains",
    "matches", "changed", "in", "notIn", "startsWith", "endsWith",
]  # fmt: skip
VALUELESS = {"exists", "absent", "changed"}


def _errors(data: Any) -> list[tuple[tuple[int | str, ...], str]]:
    """Validate ``data`` as a conditions list and return each error's location and message."""
    with pytest.raises(ValidationError) as caught:
        NODES.validate_python(data)
    return [(tuple(error["loc"]), error["msg"]) for error in caught.value.errors()]


@pytest.mark.parametrize("op", sorted(set(ALL_OPS) - VALUELESS))
def test_value_required(op: str) -> None:
    """Every operator except exists/absent/changed requires a non-null value."""
    expected = [((0, "condition", "value"), f"Value error, op {op!r} requires a value")]
    assert expected == _errors([{"path": "a", "op": op}])


@pytest.mark.parametrize("op", sorted(VALUELESS))
def test_value_optional_for_valueless_ops(op: str) -> None:
    """exists, absent and changed need no value."""
    assert [Condition(path="a", op=op)] == NODES.validate_python([{"path": "a", "op": op}])


def test_explicit_null_value_rejected() -> None:
    """An explicit null value counts as no value."""
    expected = [((0, "condition", "value"), "Value error, op 'eq' requires a value")]
    assert expected == _errors([{"path": "a", "op": "eq", "value": None}])


def test_bad_regex_rejected_with_reason() -> None:
    """A pattern RE2 cannot compile is a load error naming the pattern and the reason."""
    expected = [((0, "condition", "value"), "Value error, invalid regular expression '(': missing ): (")]
    assert expected == _errors([{"path": "a", "op": "matches", "value": "("}])


def test_backtracking_only_regex_feature_rejected() -> None:
    """Lookahead is not linear-time, so RE2 rejects it at load."""
    [(location, message)] = _errors([{"path": "a", "op": "matches", "value": "a(?=b)"}])
    expected = ((0, "condition", "value"), True)
    assert expected == (location, "invalid perl operator" in message)


@pytest.mark.parametrize(
    ("op", "value", "message"),
    [
        pytest.param("matches", 5, "op 'matches' requires a string value, got int", id="matches"),
        pytest.param("in", "abc", "op 'in' requires a list value, got str", id="in"),
        pytest.param("notIn", {"a": 1}, "op 'notIn' requires a list value, got dict", id="notIn"),
        pytest.param("startsWith", 1, "op 'startsWith' requires a string value, got int", id="sw"),
        pytest.param("endsWith", [], "op 'endsWith' requires a string value, got list", id="ew"),
        pytest.param(
            "gt",
            "abc",
            "op 'gt' compares numbers: value must be a number or a numeric string "
            "such as 42 or '42', got 'abc'",
            id="gt-word",
        ),
        pytest.param(
            "lte",
            True,
            "op 'lte' compares numbers: value must be a number or a numeric string "
            "such as 42 or '42', got True",
            id="lte-bool",
        ),
    ],
)
def test_value_type_must_suit_op(op: str, value: Any, message: str) -> None:
    """A value of the wrong kind for its operator is a load error saying what is expected."""
    assert [((0, "condition", "value"), f"Value error, {message}")] == _errors(
        [{"path": "a", "op": op, "value": value}]
    )


def test_empty_segment_rejected() -> None:
    """A path with an empty segment is a load error pointing at the path."""
    [(location, message)] = _errors([{"path": "a..b", "op": "exists"}])
    expected = ((0, "condition", "path"), True)
    assert expected == (location, "empty segment at character 2" in message)


def test_extra_key_reported_on_condition() -> None:
    """A misspelt key (opp) is reported as an extra key of the condition."""
    expected = [
        ((0, "condition", "op"), "Field required"),
        ((0, "condition", "opp"), "Extra inputs are not permitted"),
    ]
    assert expected == _errors([{"path": "a", "opp": "eq", "value": 1}])


def test_unknown_op_rejected() -> None:
    """An operator outside the list is rejected."""
    [(location, message)] = _errors([{"path": "a", "op": "gtt", "value": 1}])
    expected = ((0, "condition", "op"), True)
    assert expected == (location, message.startswith("Input should be 'eq'"))


def test_nested_groups_parse_from_plain_data() -> None:
    """Dicts and lists as loaded from YAML become nested group models."""
    data = [{"any": [{"path": "a", "op": "eq", "value": 1}, {"all": [{"path": "b", "op": "exists"}]}]}]
    expected = [
        AnyGroup(
            any=[
                Condition(path="a", op="eq", value=1),
                AllGroup(all=[Condition(path="b", op="exists")]),
            ]
        )
    ]
    assert expected == NODES.validate_python(data)


def test_error_inside_group_points_into_it() -> None:
    """An error in a nested condition has the full location through the groups."""
    [(location, _)] = _errors([{"all": [{"any": [{"path": "a", "op": "gt"}]}]}])
    expected = (0, "all", "all", 0, "any", "any", 0, "condition", "value")
    assert expected == location


def test_empty_group_rejected() -> None:
    """An any/all group needs at least one child."""
    [(location, _)] = _errors([{"any": []}])
    expected = (0, "any", "any")
    assert expected == location


def test_group_with_extra_key_rejected() -> None:
    """A group accepts only its one key."""
    [(location, _)] = _errors([{"any": [{"path": "a", "op": "exists"}], "all": []}])
    expected = (0, "any", "all")
    assert expected == location


def test_condition_is_frozen() -> None:
    """Conditions are immutable once loaded."""
    condition = Condition(path="a", op="exists")
    with pytest.raises(ValidationError):
        condition.path = "b"


def test_evaluation_never_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pattern is compiled at load (validation) and remembered; evaluation uses it."""
    condition = Condition(path="a", op="matches", value=r"\d+")

    def refuse(*_: Any) -> None:
        raise AssertionError("compiled at evaluation time")

    monkeypatch.setattr(re2, "compile", refuse)
    assert True is evaluate([condition], "all", {"a": "x42"}).matched
    assert True is evaluate([condition], "all", {"a": "x43"}).matched


def test_conditions_validate_inside_a_parent_model() -> None:
    """A model field typed list[ConditionNode] validates plain dicts."""

    class Rule(BaseModel):
        model_config = ConfigDict(frozen=True, extra="forbid")
        conditions: list[ConditionNode] = []

    rule = Rule.model_validate({"conditions": [{"all": [{"path": "argv0", "op": "eq", "value": "rm"}]}]})
    expected = 1
    assert expected == count_conditions(rule.conditions)


def test_conditions_validate_from_json() -> None:
    """The same list validates from JSON text (API and schema users)."""
    assert [Condition(path="a", op="in", value=[1, 2])] == NODES.validate_json(
        '[{"path": "a", "op": "in", "value": [1, 2]}]'
    )


def test_json_schema_describes_every_node_kind() -> None:
    """The JSON schema (sentinel schema) has the condition and both groups."""
    assert {"AllGroup", "AnyGroup", "Condition"} == set(NODES.json_schema()["$defs"])


def test_count_conditions_counts_nested_leaves() -> None:
    """count_conditions counts leaves at every depth, not groups."""
    nodes = NODES.validate_python(
        [
            {"path": "a", "op": "exists"},
            {"any": [{"path": "b", "op": "exists"}, {"all": [{"path": "c", "op": "exists"}] * 3}]},
        ]
    )
    expected = 5
    assert expected == count_conditions(nodes)


# --- property: evaluation never raises on arbitrary JSON --------------------------------------

KEYS = st.sampled_from(["a", "b", "0", "1", "x-y"])
NUMERIC_TEXT = st.sampled_from(
    ["42", "-1.5", "1e3", "1e999999999999999999999", "-0", " 42 ", "NaN", "0x10", "1" * 40]
)


def json_values(*, infinities: bool) -> st.SearchStrategy[Any]:
    """Arbitrary JSON-like values (with or without float infinities)."""
    return st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.integers(min_value=-(10**40), max_value=10**40)
        | st.floats(allow_nan=False, allow_infinity=infinities)
        | st.text(max_size=8)
        | st.sampled_from(["café", "cafe\u0301", "🚀", "a\ud800b", "\udfff"])
        | NUMERIC_TEXT,
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(KEYS | st.text(max_size=3), children, max_size=4)
        ),
        max_leaves=12,
    )


JSON = json_values(infinities=True)  # observations
VALUES = json_values(infinities=False)  # condition values: infinities are refused at load
NUMBERS = (
    st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.decimals(allow_nan=False, allow_infinity=False)
    | NUMERIC_TEXT.filter(lambda text: parse_number(text) is not None)
)
PATHS = st.sampled_from(["a", "a.b", "0", "a.0", "a[1].b", "b.a.0.a", "a.-1", "x-y", "1.1.1"])
PATTERNS = st.sampled_from(["a", ".*", r"^\d+$", "caf.", "(?i)ERROR", r"\p{L}+", "", "^.$"])


@st.composite
def conditions_of_every_op(draw: st.DrawFn) -> Condition:
    """A valid condition with any operator and an arbitrary value that suits it."""
    op = draw(st.sampled_from(ALL_OPS))
    if op in {"gt", "gte", "lt", "lte"}:
        value: Any = draw(NUMBERS)
    elif op in {"in", "notIn"}:
        value = draw(st.lists(VALUES, max_size=4))
    elif op in {"startsWith", "endsWith"}:
        value = draw(st.text(max_size=4))
    elif op == "matches":
        value = draw(PATTERNS)
    elif op in VALUELESS:
        value = draw(JSON)
    else:
        value = draw(VALUES.filter(lambda candidate: candidate is not None))
    return Condition(path=draw(PATHS), op=op, value=value)


OBSERVATIONS = st.dictionaries(KEYS, JSON, max_size=4) | JSON


@settings(max_examples=300, deadline=None)
@given(
    nodes=st.lists(conditions_of_every_op(), max_size=4),
    match=st.sampled_from(["all", "any"]),
    observation=OBSERVATIONS,
    previous=OBSERVATIONS,
)
def test_evaluate_never_raises(nodes: list[Condition], match: Any, observation: Any, previous: Any) -> None:
    """Any operator and value over arbitrary JSON gives a bool and one result per leaf."""
    evaluation = evaluate(nodes, match, observation, previous)
    assert (bool, len(nodes)) == (type(evaluation.matched), len(evaluation.results))


@settings(max_examples=100, deadline=None)
@given(value=VALUES.filter(lambda candidate: candidate is not None))
def test_eq_is_reflexive_on_json(value: Any) -> None:
    """Every JSON value equals itself (and is not changed against itself)."""
    eq = Condition(path="a", op="eq", value=value)
    same = Condition(path="a", op="changed")
    evaluation = evaluate([eq, same], "all", {"a": value}, {"a": value})
    expected = [True, False]
    assert expected == [result.result for result in evaluation.results]


def test_decimal_value_accepted_for_numeric_op() -> None:
    """A Decimal value (exact YAML loaders) is a number."""
    assert True is evaluate([Condition(path="a", op="lt", value=Decimal("0.3"))], "all", {"a": 0.1}).matched


@pytest.mark.parametrize(
    ("op", "value"),
    [
        ("eq", math.nan),
        ("neq", math.inf),
        ("gt", -math.inf),
        ("in", [1, math.nan]),
        ("contains", {"a": [math.nan]}),
    ],
    ids=["eq-nan", "neq-inf", "gt-minus-inf", "in-nan", "contains-nested"],
)
def test_non_finite_values_refused(op: str, value: Any) -> None:
    """NaN and infinities (YAML's .nan, .inf) are refused at load: NaN equals nothing and neither
    is JSON, so a watcher holding one could not be stored."""
    [(location, message)] = _errors([{"path": "a", "op": op, "value": value}])
    assert ((0, "condition", "value"), True) == (location, "holds NaN or an infinity" in message)


def test_conditions_that_ran_still_pickle_and_compile_again_after() -> None:
    """A node's compiled check is a closure: after it ran, the node still pickles (the compiled
    cache writes watchers a running process already polled with), without it, and the copy read
    back compiles again to the same answers."""
    import pickle

    [node] = NODES.validate_python(
        [{"any": [{"path": "a", "op": "changed"}, {"all": [{"path": "b", "op": "matches", "value": "x+"}]}]}]
    )
    assert node.check({"a": 1, "b": "y"}, {"a": 2, "b": "y"})
    assert node.trace
    copy = pickle.loads(pickle.dumps(node))
    assert copy == node
    assert "check" not in copy.__dict__, "compiled again on first use, not carried"
    for now, before in (
        ({"a": 1, "b": "y"}, {"a": 2, "b": "y"}),
        ({"a": 1, "b": "y"}, {"a": 1}),
        ({"b": "xx"}, {}),
    ):
        assert node.check(now, before) == copy.check(now, before)
