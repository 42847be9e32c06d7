"""The fast YAML reader gives exactly what ruamel.yaml's round-trip loader gives, or steps aside.

``parse_yaml`` reads with libyaml's composer and our own YAML 1.2 scalar resolution
(``config.yamlcompose``); ``parse_yaml_roundtrip`` is the reference. Each test compares the
two: the same data (types included: ``repr`` tells ``1`` from ``1.0`` from ``True``) and the
same line of every key and list item.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sentinel_hooks.config.envvars import ENV_MARK
from sentinel_hooks.config.linemap import LineMap
from sentinel_hooks.config.yamlcompose import Unsure, compose_plain, resolve_plain
from sentinel_hooks.config.yamlfile import parse_yaml, parse_yaml_roundtrip
from sentinel_hooks.errors import ConfigError


def read_both(text: str) -> tuple[Any, Any]:
    """``(fast, reference)`` as ``(repr(data), lines)``; an error is ``("error", messages)``.

    ruamel.yaml itself fails on a few scalars (``-_`` is an int to its resolver, and then not a
    number); the round-trip reader reports that as a ConfigError, the fast one reads the text.
    """
    results: list[Any] = []
    for parse in (parse_yaml, parse_yaml_roundtrip):
        try:
            doc = parse(text, display="w.yaml")
        except ConfigError as exc:
            results.append(("error", [str(issue) for issue in exc.issues]))
        else:
            results.append((repr(doc.data), doc.lines.lines))
    return results[0], results[1]


def assert_same(text: str) -> None:
    fast, reference = read_both(text)
    if reference[0] == "error" and "a value could not be read" in reference[1][0]:
        assert fast[0] != "error"  # a value ruamel.yaml cannot construct: YAML 1.2 reads text
        return
    assert reference == fast


@pytest.mark.parametrize("text", ["-_", "+_", "._", "-__"])
def test_number_like_text_without_a_digit_is_text(text: str) -> None:
    """ruamel.yaml takes these for numbers and fails on them; YAML 1.2's core schema reads
    text, and so does Sentinel."""
    assert {"k": text} == parse_yaml(f"k: {text}\n", display="w.yaml").data


def test_a_value_the_round_trip_reader_cannot_construct_is_a_config_error() -> None:
    """Whatever ruamel.yaml fails on inside (not a YAML error) is reported, not a crash."""
    with pytest.raises(ConfigError, match="a value could not be read"):
        parse_yaml_roundtrip("k: -_\n", display="w.yaml")


SCALARS = [
    ("yes", "yes"),
    ("no", "no"),
    ("on", "on"),
    ("off", "off"),
    ("Yes", "Yes"),
    ("y", "y"),
    ("true", True),
    ("False", False),
    ("TRUE", True),
    ("~", None),
    ("null", None),
    ("Null", None),
    ("NULL", None),
    ("", None),
    ("nil", "nil"),
    ("0", 0),
    ("-0", 0),
    ("+5", 5),
    ("12345678901234567890", 12345678901234567890),
    ("0o17", 15),
    ("0x1F", 31),
    ("0xff", 255),
    ("1e3", 1000.0),
    ("1E3", 1000.0),
    ("-1.5e-3", -0.0015),
    ("1.", 1.0),
    ("0.0", 0.0),
    ("-0.0", -0.0),
    ("3.25", 3.25),
    (".inf", math.inf),
    ("-.Inf", -math.inf),
    ("+.INF", math.inf),
    ("127.0.0.1", "127.0.0.1"),
    ("1.2.3", "1.2.3"),
    ("5m", "5m"),
    ("0 * * * *", "0 * * * *"),
    (".sentinel/state.db", ".sentinel/state.db"),
    ("-1h", "-1h"),
    ("12:30", "12:30"),
    ("0x", "0x"),
    ("e3", "e3"),
]


@pytest.mark.parametrize(("text", "expected"), SCALARS)
def test_plain_scalars_resolve_by_yaml_1_2(text: str, expected: Any) -> None:
    """Plain scalars read as the YAML 1.2 core schema says: ``no``/``on``/``yes`` stay text."""
    value = resolve_plain(text)
    assert (type(expected), expected) == (type(value), value)
    assert_same(f"a: {text}\n")


def test_nan_is_a_float() -> None:
    """``.nan`` and its spellings are a float NaN, as in the round-trip loader."""
    for text in (".nan", ".NaN", ".NAN"):
        assert math.isnan(resolve_plain(text))
        assert_same(f"a: {text}\n")


@pytest.mark.parametrize(
    "text",
    [
        "1_000",
        "017",
        "00",
        "0b101",
        "-0x1F",
        "+0o7",
        ".5",
        "1.5_0",
        "-.nan",
        "=",
        "<<",
        "2024-01-01",
        "2024-01-01 12:00:00",
        "2024-1-1T12:00:00Z",
        "2024-01-01T12:00:00+02:00",
    ],
)
def test_rarer_spellings_are_left_to_the_round_trip_loader(text: str) -> None:
    """Underscores, leading zeros, binary, signed hex, timestamps: ruamel.yaml reads them."""
    with pytest.raises(Unsure):
        resolve_plain(text)
    assert compose_plain(f"a: {text}\n") is None
    assert_same(f"a: {text}\n")


def test_timestamps_keep_their_iso_text() -> None:
    """A timestamp becomes its ISO text, as before (the models take strings)."""
    doc = parse_yaml("a: 2024-01-01 12:00:00\nb: 2024-01-01\n", display="w.yaml")
    assert {"a": "2024-01-01T12:00:00", "b": "2024-01-01"} == doc.data


@pytest.mark.parametrize(
    "text",
    [
        "a: 'no'\nb: \"1\"\nc: 'true'\nd: \"~\"\ne: ''\nf: \"0x1F\"\n",
        "a: |\n  line one\n  line two\nb: >-\n  folded\n  text\n\n  para\nc: |+\n  kept\n\nd: x\n",
        "a: plain text\n  continued on\n  three lines\nb: 1\n",
        "a: \"double \\u00e9 \\t \\/ \\n quoted\"\nb: 'it''s'\n",
        "? complex key\n: value\n1: one\ntrue: yes\nnull: n\n3.5: f\n'2': two\n",
        "- 1\n- [a, {b: c}]\n-\n  k: v\n- - x\n  - y\n- {}\n- []\n-\n",
        "a:\n- 1\n- 2\nb:\n  - c: 1\n    d: [2,\n      3]\n",
        "list: [1, 2.5, no, ~, 'x', \"y\"]\nmap: {k: v, n: 0o10}\n",
        "# a comment\na: 1 # trailing\n# another\n",
        "x: 1\r\ny:\r\n  - 2\r\n",
        "\ufeffa: 1\n",
        "a: tab\tinside\n",
        "a: \"t\\tx\"\nb: 'q\tq'\n",
        'a: "ünïcödé ✓"\nb: 日本\n',
        "a: '{{ payload.x }}'\nb: \"${env:X:-1}\"\nc: 'x != y'\n",
        "a: {% if x %}\n",
    ],
)
def test_documents_read_the_same_both_ways(text: str) -> None:
    """Quoted and block scalars, flow and block collections, odd keys: data and lines agree."""
    assert_same(text)


@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n", "---\n...\n", "\n\n"])
def test_empty_documents_are_none(text: str) -> None:
    """An empty file (or comments only) reads as None with the root on line 1."""
    doc = parse_yaml(text, display="w.yaml")
    assert (None, {(): 1}) == (doc.data, doc.lines.lines)
    assert_same(text)


def test_anchors_and_aliases_copy_the_anchored_value() -> None:
    """An alias reads as the anchored value; its lines are those of the anchor."""
    text = "base: &b {x: 1, y: [2]}\nuse: *b\nitems:\n  - &s text\n  - *s\n  - *b\n"
    assert compose_plain(text) is not None
    assert_same(text)
    doc = parse_yaml(text, display="w.yaml")
    assert doc.data["use"] == {"x": 1, "y": [2]}
    assert 1 == doc.lines.line_of(("use", "x"))


def test_merge_keys_still_merge() -> None:
    """``<<`` merges as before (the round-trip loader reads such files)."""
    text = "base: &b {x: 1, y: 2}\nm:\n  a: 0\n  <<: *b\n  x: 5\nn:\n  <<: [*b]\n"
    assert compose_plain(text) is None
    assert_same(text)
    assert {"a": 0, "x": 5, "y": 2} == parse_yaml(text, display="w.yaml").data["m"]


@pytest.mark.parametrize(
    "text",
    [
        "a: !!str 5\n",
        "a: !!int '5'\n",
        "a: ! 5\n",
        "- !custom x\n",
        "%YAML 1.1\n---\na: yes\n",
        "a: line\u2028break\n",
        "a: &r [*r]\n",
    ],
)
def test_tags_directives_and_odd_breaks_take_the_round_trip_path(text: str) -> None:
    """Explicit tags, ``%`` directives and YAML 1.1 line breaks are not guessed at."""
    assert compose_plain(text) is None
    assert_same(text)


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\na: 2\n",
        "a:\n  b: 1\n  c: 2\n  b: 3\n",
        "a: 1\n'a': 2\n",
        "1: x\n'1': y\n",
        "a: [1, 2\nb: 3\n",
        "a: b: c\n",
        "a: 1\n---\nb: 2\n",
        "a:\n\t- 1\n",
        'a: "unclosed\n',
    ],
)
def test_errors_are_worded_as_before(text: str) -> None:
    """Duplicate keys and syntax errors keep the round-trip loader's file:line message."""
    fast, reference = read_both(text)
    assert reference == fast


SCALAR_ALPHABET = "0123456789._-+eExXoObB:aAfFnNtTlLsSuU~<=! "


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=SCALAR_ALPHABET, min_size=1, max_size=8))
def test_any_scalar_reads_the_same_both_ways(text: str) -> None:
    """Random number-, bool- and null-like scalars read the same as with the round-trip loader."""
    assert_same(f"k: {text}\nl: [{text}]\n")


KEYS = st.text(alphabet="abcXYZ019_-. ", min_size=1, max_size=6)
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(alphabet="ab yno01.:#'\"-{}[]&*!|>%@`,?\\\n\u00e9", max_size=10),
)
DATA = st.recursive(
    LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(DATA, st.sampled_from([None, True, False]))
def test_any_dumped_document_reads_the_same_both_ways(data: Any, flow: bool | None) -> None:
    """Documents written by ruamel.yaml in block and flow styles read the same both ways."""
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.default_flow_style = flow
    out = io.StringIO()
    yaml.dump(data, out)
    assert_same(out.getvalue())


def _paths(data: Any, loc: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Every path in ``data``, plus one missing key or index below each container."""
    found = [loc]
    if isinstance(data, dict):
        found.append((*loc, "no such key"))
        for key, value in data.items():
            found.extend(_paths(value, (*loc, key)))
    elif isinstance(data, list):
        found.append((*loc, len(data)))
        for index, value in enumerate(data):
            found.extend(_paths(value, (*loc, index)))
    return found


@settings(max_examples=200, deadline=None)
@given(DATA, st.sampled_from([None, True, False]))
def test_lines_found_in_the_nodes_match_the_recorded_ones(data: Any, flow: bool | None) -> None:
    """The fast reader finds a line in its node tree when asked (``NodeLines``); every path,
    present or missing, and every re-rooted view must give what the full map of lines gives."""
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.default_flow_style = flow
    out = io.StringIO()
    yaml.dump({"watchers": [data, data]}, out)
    try:
        doc = parse_yaml(out.getvalue(), display="w.yaml")
    except ConfigError:  # ruamel.yaml cannot always read back what it wrote
        assume(False)
    recorded = LineMap(dict(doc.lines.lines))
    for path in _paths(doc.data):
        assert recorded.line_of(path) == doc.lines.line_of(path), path
    for prefix in (("watchers",), ("watchers", 1), ("watchers", 5)):
        view, reference = doc.lines.sub(prefix), recorded.sub(prefix)
        for path in _paths(doc.data):
            assert reference.line_of(path[len(prefix) :]) == view.line_of(path[len(prefix) :]), (prefix, path)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789._-+eExXoObBaAfFnNtTlLsSuUyY~", min_size=1, max_size=8))
def test_environment_values_read_as_yaml_scalars_the_same_way(text: str) -> None:
    """A value from the environment reads as the number or boolean ruamel.yaml reads it as."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    from sentinel_hooks.config.envvars import yaml_scalar

    try:
        value = YAML(typ="safe", pure=True).load(text)
    except (YAMLError, ValueError, IndexError):
        value = None
    expected = value if isinstance(value, bool | int | float) else None
    try:
        actual = yaml_scalar(text)
    except (ValueError, IndexError):
        actual = None
    assert repr(expected) == repr(actual)


def _strings(data: Any) -> list[str]:
    if isinstance(data, dict):
        return [s for value in data.values() for s in _strings(value)]
    if isinstance(data, list):
        return [s for item in data for s in _strings(item)]
    return [data] if isinstance(data, str) else []


ENV_TEXT = st.text(alphabet="${}env:XY \n\\\"'|>-x24u", max_size=30)


@settings(max_examples=400, deadline=None)
@given(
    ENV_TEXT,
    st.sampled_from(["k: {}\n", 'k: "{}"\n', "k: '{}'\n", "k: |\n  {}\n", "k: >\n  {}\n", "- [{}]\n"]),
)
def test_a_document_said_to_hold_no_env_reference_holds_none(text: str, shape: str) -> None:
    """``may_reference_env`` False (the interpolation pass skipped) only where no value holds
    ``${env:``: escapes and line folding are the ways a value differs from its text."""
    document = shape.format(text.replace("\n", "\n  ") if "  " in shape else text)
    for parse in (parse_yaml, parse_yaml_roundtrip):
        try:
            doc = parse(document, display="f.yaml")
        except ConfigError:
            continue
        assert doc.may_reference_env or not any(ENV_MARK in s for s in _strings(doc.data))


@pytest.mark.parametrize("text", ['k: "\\x24{env:A}"\n', 'k: "\\u0024{env:A}"\n', 'k: "$\\\n  {env:A}"\n'])
def test_an_escaped_env_reference_is_interpolated(text: str) -> None:
    """A reference written with an escape is still found: the file's text has a backslash."""
    doc = parse_yaml(text, display="f.yaml")
    assert (True, {"k": "${env:A}"}) == (doc.may_reference_env, doc.data)
