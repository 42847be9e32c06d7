"""Tests for canonical JSON and exact numbers (``changed``, dedupe keys, numeric operators)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sentinel_hooks.canonical import (
    _tokens_json,
    canonical_json,
    compare_numbers,
    parse_number,
    sha256_hex,
    to_number,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param({"b": 1, "a": [1, 2]}, '{"a":[1,2],"b":1}', id="sorted-keys-no-spaces"),
        pytest.param({"a": {"d": 1, "c": 2}}, '{"a":{"c":2,"d":1}}', id="nested-keys-sorted"),
        pytest.param(1.0, "1", id="integral-float"),
        pytest.param(-0.0, "0", id="negative-zero"),
        pytest.param(Decimal("1.0"), "1", id="decimal-integral"),
        pytest.param(Decimal("1.50"), "1.5", id="decimal-trailing-zero"),
        pytest.param(Decimal("-0.000"), "0", id="decimal-negative-zero"),
        pytest.param(0.1, "0.1", id="float-shortest"),
        pytest.param(123.456, "123.456", id="float-fraction"),
        pytest.param(1e-6, "0.000001", id="small-fixed"),
        pytest.param(1e-7, "1e-7", id="small-exponent"),
        pytest.param(1e21, "1000000000000000000000", id="large-integral-float"),
        pytest.param(2**64 + 1, "18446744073709551617", id="big-int-exact"),
        pytest.param(10**30, "1" + "0" * 30, id="int-10-30"),
        pytest.param(Decimal("1e5000"), "1e+5000", id="decimal-huge-exponent"),
        pytest.param(Decimal("-1.5e-999999"), "-1.5e-999999", id="decimal-tiny"),
        pytest.param(float("nan"), "null", id="nan"),
        pytest.param(float("-inf"), "null", id="infinity"),
        pytest.param(Decimal("NaN"), "null", id="decimal-nan"),
        pytest.param(True, "true", id="true"),
        pytest.param(None, "null", id="null"),
        pytest.param("café 🚀", '"café 🚀"', id="unicode-unescaped"),
        pytest.param('q"\\\n\x1f', '"q\\"\\\\\\n\\u001f"', id="minimal-escapes"),
        pytest.param("a\ud800", '"a\\ud800"', id="lone-surrogate-escaped"),
        pytest.param((1, "x"), '[1,"x"]', id="tuple-is-array"),
        pytest.param({1: "a"}, '{"1":"a"}', id="non-string-key"),
        pytest.param(dt.date(2024, 1, 2), '"2024-01-02"', id="other-via-str"),
    ],
)
def test_canonical_json_renders(value: Any, expected: str) -> None:
    """Each JSON value has exactly one canonical spelling."""
    assert expected == canonical_json(value)


def test_canonical_json_one_and_one_point_zero_identical() -> None:
    """1, 1.0 and Decimal('1.00') render the same text."""
    assert {"1"} == {canonical_json(1), canonical_json(1.0), canonical_json(Decimal("1.00"))}


def test_canonical_json_sorts_keys_by_utf16_code_units() -> None:
    """Keys sort by UTF-16 code units (RFC 8785): U+1F600 (D83D…) before U+E000."""
    expected = '{"😀":1,"\ue000":2}'
    assert expected == canonical_json({"\ue000": 2, "😀": 1})


def test_canonical_json_rejects_self_containing_list() -> None:
    """A container that contains itself is not JSON and raises ValueError."""
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(ValueError, match="contains itself"):
        canonical_json(looped)


def test_canonical_json_allows_shared_subvalue() -> None:
    """The same list twice (not a cycle) renders twice."""
    shared = [1]
    expected = "[[1],[1]]"
    assert expected == canonical_json([shared, shared])


def test_canonical_json_handles_deep_nesting() -> None:
    """Nesting far beyond the recursion limit renders without error."""
    value: Any = 1
    for _ in range(50_000):
        value = [value]
    expected = "[" * 50_000 + "1" + "]" * 50_000
    assert expected == canonical_json(value)


def test_sha256_hex_of_empty_string() -> None:
    """sha256_hex is the hex SHA-256 of the UTF-8 text."""
    expected = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert expected == sha256_hex("")


def test_sha256_hex_accepts_lone_surrogate() -> None:
    """A lone surrogate does not make hashing raise."""
    expected = 64
    assert expected == len(sha256_hex("\udc00"))


@pytest.mark.parametrize(
    ("text", "is_number"),
    [
        pytest.param("42", True, id="int"),
        pytest.param("-1.5", True, id="negative-fraction"),
        pytest.param("1e3", True, id="exponent"),
        pytest.param("1E+03", True, id="exponent-sign-leading-zero"),
        pytest.param("-0", True, id="negative-zero"),
        pytest.param(" 42 ", False, id="spaces"),
        pytest.param("42\n", False, id="trailing-newline"),
        pytest.param("0x10", False, id="hex"),
        pytest.param("NaN", False, id="nan"),
        pytest.param("Infinity", False, id="infinity"),
        pytest.param("+1", False, id="plus"),
        pytest.param("01", False, id="leading-zero"),
        pytest.param("1.", False, id="trailing-dot"),
        pytest.param(".5", False, id="leading-dot"),
        pytest.param("1_000", False, id="underscore"),
        pytest.param("٣", False, id="arabic-indic-digit"),
        pytest.param("", False, id="empty"),
    ],
)
def test_parse_number_follows_json_grammar(text: str, is_number: bool) -> None:
    """Only strings in exactly the JSON number grammar are numbers."""
    assert is_number == (parse_number(text) is not None)


@pytest.mark.parametrize(
    ("smaller", "larger"),
    [
        pytest.param("18446744073709551616", "18446744073709551617", id="2-64-plus-1"),
        pytest.param("999999999999999999999999999999", "1e30", id="10-30"),
        pytest.param("-1", "0", id="negative-below-zero"),
        pytest.param("-2", "-1.5", id="negatives"),
        pytest.param("1.5", "1.51", id="digit-prefix"),
        pytest.param("1e-999999999999999999999", "1e-999999", id="tiny-exponents"),
        pytest.param("1e999999", "1e999999999999999999999", id="huge-exponents"),
        pytest.param("1e" + "9" * 4999, "1e" + "9" * 5000, id="exponent-5000-digits"),
        pytest.param("9e" + "9" * 5000, "1e" + "1" + "0" * 5000, id="exponent-carry"),
    ],
)
def test_compare_numbers_orders_exactly(smaller: str, larger: str) -> None:
    """Numbers compare exactly, however large or precise."""
    low, high = parse_number(smaller), parse_number(larger)
    assert low is not None
    assert high is not None
    expected = (-1, 1, 0)
    assert expected == (
        compare_numbers(low, high),
        compare_numbers(high, low),
        compare_numbers(low, low),
    )


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param(100, 100.0, id="int-float"),
        pytest.param(0.1, Decimal("0.1"), id="float-by-repr"),
        pytest.param(10**30, 1e30, id="big-int-float"),
        pytest.param(1500, Decimal("1.5e3"), id="decimal-exponent"),
    ],
)
def test_to_number_equal_values_are_equal(first: Any, second: Any) -> None:
    """Different spellings of one number give equal exact numbers."""
    assert to_number(first) == to_number(second)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(True, id="bool"),
        pytest.param("1", id="string"),
        pytest.param(float("inf"), id="infinity"),
        pytest.param(Decimal("sNaN"), id="signalling-nan"),
        pytest.param(None, id="null"),
    ],
)
def test_to_number_rejects_non_numbers(value: Any) -> None:
    """Booleans, strings and non-finite values are not JSON numbers."""
    assert None is to_number(value)


def test_to_number_huge_int_is_exact() -> None:
    """An int past CPython's str-conversion digit limit still converts exactly."""
    huge = to_number(10**5000 + 1)
    assert huge is not None
    expected = (1, 5001)
    assert expected == (huge.sign, len(huge.digits))


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**200), max_value=2**200)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=15,
)


def _reordered(value: Any) -> Any:
    """The same JSON value with every object's keys inserted in reverse order."""
    if isinstance(value, dict):
        return {key: _reordered(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(member) for member in value]
    return value


@settings(max_examples=150, deadline=None)
@given(JSON)
def test_canonical_json_ignores_key_order(value: Any) -> None:
    """Key insertion order never changes the text."""
    assert canonical_json(value) == canonical_json(_reordered(value))


@settings(max_examples=150, deadline=None)
@given(JSON)
def test_canonical_json_is_stable_through_a_json_round_trip(value: Any) -> None:
    """The text is valid JSON, and parsing it back gives the same canonical text."""
    text = canonical_json(value)
    assert text == canonical_json(json.loads(text))


FLOAT_EDGES = [
    0.0,
    -0.0,
    1.0,
    -2.0,
    0.5,
    1e-4,
    -1e-4,
    9.999999999999999e-05,
    0.00010000000000000002,
    1e16,
    9999999999999998.0,
    1e16 - 1.5,
    1e15 + 0.5,
    5e-324,
    1.7976931348623157e308,
    float("inf"),
    float("nan"),
]


PLAIN = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**2100), max_value=2**2100)
    | st.text(max_size=10)
    | st.sampled_from(["\ud800", 'a\x00\x1f\x7f"\\\n', "\U0001f600", "\ufb01"])
    | st.floats()
    | st.floats(min_value=1e-5, max_value=1e-3)
    | st.floats(min_value=1e15, max_value=1e17)
    | st.sampled_from(FLOAT_EDGES),
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(
            st.text(max_size=4) | st.sampled_from(["\U0001f600", "\ufb01", "\ud800"]), children, max_size=4
        )
    ),
    max_leaves=15,
)


@settings(max_examples=300, deadline=None)
@given(PLAIN | JSON)
def test_canonical_json_fast_path_spells_what_the_token_path_spells(value: Any) -> None:
    """Values json.dumps can spell (strings, ints, fractions of a usual size, nesting) take it; the
    text is the same as the token-by-token path's, astral and surrogate keys and strings, huge
    ints and floats of every size and at the fast path's bounds included."""
    assert canonical_json(value) == _tokens_json(value)


def test_canonical_json_spells_floats_at_the_fast_paths_bounds_as_the_token_path() -> None:
    """Floats inside a container: fractions of a usual size go the fast path; whole ones, tiny
    ones, NaN and infinity keep the token path's spelling."""
    floats = [float("inf"), float("nan"), -0.0, 1.0, 1e-05, 0.5, 1e16, 123.25, -0.0001]
    spelt = ["null", "null", "0", "1", "0.00001", "0.5", "10000000000000000", "123.25", "-0.0001"]
    assert [f"[{text}]" for text in spelt] == [canonical_json([value]) for value in floats]
    assert [_tokens_json([value]) for value in floats] == [canonical_json([value]) for value in floats]


def test_canonical_json_fast_path_leaves_deep_and_subclassed_values_to_the_token_path() -> None:
    """Nesting past json.dumps' comfort, bool/int subclasses and non-str keys are spelled as before."""
    deep: Any = "x"
    for _ in range(70):
        deep = [deep]
    assert canonical_json(deep) == "[" * 70 + '"x"' + "]" * 70

    class Level(int):
        def __str__(self) -> str:
            return "level"

    assert canonical_json({"a": Level(3), "b": [1]}) == '{"a":3,"b":[1]}'
    assert canonical_json({1: "one", "b": None}) == '{"1":"one","b":null}'
