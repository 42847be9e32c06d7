"""``codec``: an envelope this process stored lately is read back without parsing it again; any
other text is parsed and validated, and corrupt text is a ``StoreError``."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.errors import StoreError
from sentinel_hooks.store import codec
from sentinel_hooks.watchers.builder import Firing, build_envelope
from tests.core.test_envelope import AT, watcher


def stored_envelope(usd: int) -> tuple[Envelope, str]:
    envelope = build_envelope(watcher(), ServiceConfig(), Firing("match", {"usd": usd}, AT))
    return envelope, codec.dump_envelope(envelope)


def test_an_envelope_just_stored_is_read_back_as_it_was_stored() -> None:
    envelope, text = stored_envelope(1)
    assert codec.load_envelope(text) is envelope


def test_text_not_stored_here_is_parsed_into_an_equal_envelope() -> None:
    envelope, text = stored_envelope(2)
    other = text.replace('"usd":2', '"usd":2.0')  # the same value, another text: not remembered
    loaded = codec.load_envelope(other)
    assert loaded is not envelope
    assert loaded.model_dump() == envelope.model_dump()


def test_only_the_latest_envelopes_are_remembered() -> None:
    first, first_text = stored_envelope(3)
    for usd in range(4, 4 + codec.WRITTEN_ENVELOPES):
        stored_envelope(usd)
    again = codec.load_envelope(first_text)
    assert (again is first, again) == (False, first)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{", "not a valid JSON object"),
        ("[1]", "not a valid JSON object"),
        ('{"type":"sentinel.callback"}', "Envelope is corrupt"),
    ],
)
def test_corrupt_envelope_text_is_a_store_error(text: str, says: str) -> None:
    with pytest.raises(StoreError, match=says):
        codec.load_envelope(text)


def test_a_remembered_envelope_is_the_one_its_text_validates_to() -> None:
    """The text of a stored envelope validates to an envelope equal to it, so handing out the
    remembered object changes nothing a reader can see."""
    envelope, text = stored_envelope(5)
    assert Envelope.model_validate_json(text) == envelope


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300)
@given(_JSON)
def test_dumps_writes_what_json_dumps_writes(value: object) -> None:
    """The encoder made once spells every value as ``json.dumps`` with the same options does."""
    expected = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    assert codec.dumps(value, what="a value") == expected


def _contains_itself() -> dict[str, object]:
    value: dict[str, object] = {"a": 1}
    value["self"] = value
    return value


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({"at": float("nan")}, "Out of range float"),
        ({"ids": {1, 2}}, "not JSON serializable"),
        (_contains_itself(), "recursion"),
    ],
)
def test_a_value_that_is_not_json_is_a_store_error_naming_what(value: object, says: str) -> None:
    with pytest.raises(StoreError, match="cannot store state of 'w1': it is not JSON") as caught:
        codec.dumps(value, what="state of 'w1'")
    assert says in str(caught.value)
