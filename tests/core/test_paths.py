"""Tests for dotted paths: parsing (load-time errors) and resolving (never raises)."""

from __future__ import annotations

import copy
import pickle
import re
from typing import Any

import pytest

from sentinel_hooks.core.paths import MISSING, is_index, parse_path, resolve


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("a", ("a",), id="single-key"),
        pytest.param("items.0.status", ("items", "0", "status"), id="dotted-index"),
        pytest.param("items[0].status", ("items", "0", "status"), id="bracket-index"),
        pytest.param("items[0][12]", ("items", "0", "12"), id="consecutive-brackets"),
        pytest.param("[0].name", ("0", "name"), id="leading-bracket"),
        pytest.param("payload.x-y", ("payload", "x-y"), id="dash-in-key"),
        pytest.param("a. b", ("a", " b"), id="space-is-part-of-key"),
        pytest.param("café.ñandú", ("café", "ñandú"), id="unicode-keys"),
        pytest.param("items.-1", ("items", "-1"), id="negative-segment-is-a-key"),
        pytest.param("a.01", ("a", "01"), id="leading-zero-segment-is-a-key"),
    ],
)
def test_parse_path_splits_segments(text: str, expected: tuple[str, ...]) -> None:
    """A valid path parses into its segments, brackets becoming plain index segments."""
    assert expected == parse_path(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("", "path is empty", id="empty-path"),
        pytest.param("a..b", "empty segment at character 2", id="double-dot"),
        pytest.param(".a", "empty segment at character 0", id="leading-dot"),
        pytest.param("a.", "empty segment at character 2", id="trailing-dot"),
        pytest.param(".", "empty segment at character 0", id="only-dot"),
        pytest.param("a.[0]", "empty segment at character 2", id="dot-before-bracket"),
        pytest.param("a[0", "'[' at character 1 is never closed", id="unclosed-bracket"),
        pytest.param("a[[0]]", "'[' at character 1 is never closed", id="nested-bracket"),
        pytest.param("a]", "']' at character 1 has no matching '['", id="stray-close-bracket"),
        pytest.param("a[x]", "[x] at character 1 is not an array index", id="word-in-brackets"),
        pytest.param("a[-1]", "[-1] at character 1 is not an array index", id="negative-bracket"),
        pytest.param("a[01]", "[01] at character 1 is not an array index", id="leading-zero"),
        pytest.param("a[]", "[] at character 1 is not an array index", id="empty-brackets"),
        pytest.param("a[ 0 ]", "[ 0 ] at character 1 is not an array index", id="spaces"),
        pytest.param("a[0]b", "expected '.' or '[' after ']' at character 4", id="text-after"),
    ],
)
def test_parse_path_rejects_malformed_path(text: str, message: str) -> None:
    """A malformed path raises ValueError naming the problem and where it is."""
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_path(text)


def test_parse_path_error_quotes_the_path() -> None:
    """The error message quotes the offending path so the user can find it."""
    with pytest.raises(ValueError, match=re.escape("path 'a..b'")):
        parse_path("a..b")


DATA: dict[str, Any] = {
    "items": [{"name": "first"}, {"name": "second", "status": None}],
    "byIndex": {"0": "zero-key"},
    "flag": False,
    "text": "abc",
    "pair": (10, 20),
}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param("items.0.name", "first", id="dotted-index"),
        pytest.param("items[1].name", "second", id="bracket-index"),
        pytest.param("items[1]", {"name": "second", "status": None}, id="whole-element"),
        pytest.param("items.1.status", None, id="null-is-a-value"),
        pytest.param("byIndex.0", "zero-key", id="dict-key-0"),
        pytest.param("flag", False, id="false-is-a-value"),
        pytest.param("pair.1", 20, id="tuple-index"),
    ],
)
def test_resolve_finds_value(path: str, expected: Any) -> None:
    """A path that exists resolves to its value, null included."""
    assert expected == resolve(DATA, parse_path(path))


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("items.-1", id="negative-index"),
        pytest.param("items.2", id="index-out-of-range"),
        pytest.param("items.01", id="leading-zero-index"),
        pytest.param("items.name", id="key-on-array"),
        pytest.param("items.0.name.0", id="index-on-string"),
        pytest.param("text.upper", id="string-method"),
        pytest.param("items.append", id="list-method"),
        pytest.param("byIndex.keys", id="dict-method"),
        pytest.param("byIndex.__class__", id="dunder"),
        pytest.param("items.1.status.x", id="below-null"),
        pytest.param("nope", id="absent-key"),
        pytest.param("items.99999999999999999999999999", id="huge-index"),
        pytest.param("items.\u0661", id="non-ascii-digit"),
    ],
)
def test_resolve_returns_missing(path: str) -> None:
    """A path that does not exist resolves to MISSING, never to an attribute or method."""
    assert MISSING is resolve(DATA, parse_path(path))


def test_resolve_of_no_segments_is_the_data() -> None:
    """Resolving no segments returns the data itself."""
    assert DATA is resolve(DATA, ())


def test_resolve_on_scalar_is_missing() -> None:
    """A scalar observation has no keys."""
    assert MISSING is resolve(42, ("a",))


@pytest.mark.parametrize(
    ("segment", "expected"),
    [
        pytest.param("0", True, id="zero"),
        pytest.param("17", True, id="number"),
        pytest.param("-1", False, id="negative"),
        pytest.param("+1", False, id="plus"),
        pytest.param("01", False, id="leading-zero"),
        pytest.param("1.0", False, id="decimal"),
        pytest.param("²", False, id="superscript-digit"),
        pytest.param("", False, id="empty"),
    ],
)
def test_is_index(segment: str, expected: bool) -> None:
    """Only plain non-negative ASCII integers index arrays."""
    assert expected == is_index(segment)


def test_missing_is_falsy() -> None:
    """MISSING is falsy, like an absent value."""
    assert False is bool(MISSING)


def test_missing_repr() -> None:
    """MISSING shows as MISSING in results and logs."""
    expected = "MISSING"
    assert expected == repr(MISSING)


def test_missing_survives_copy_and_pickle() -> None:
    """MISSING stays the same singleton through copy and pickle."""
    expected = [MISSING, MISSING]
    assert expected == [copy.deepcopy(MISSING), pickle.loads(pickle.dumps(MISSING))]
    assert MISSING is pickle.loads(pickle.dumps(MISSING))
