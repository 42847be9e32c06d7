"""How tool-call arguments from an OpenAI-compatible server are decoded (no server needed)."""

from __future__ import annotations

import pytest

from sentinel_hooks.callbacks.backends.openai import arguments_text, parse_arguments


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"limit": 5}', {"limit": 5}),
        ({"limit": 5}, {"limit": 5}),  # some servers send an object, not JSON text
        ("", {}),
        ("  ", {}),
        ('{"limit": ', '{"limit": '),
        ("[1, 2]", "[1, 2]"),
        ('"text"', '"text"'),
    ],
    ids=["json text", "object", "empty", "blank", "broken json", "json list", "json string"],
)
def test_arguments_become_a_dict_or_stay_raw(raw: object, expected: object) -> None:
    """A JSON object decodes to a dict, nothing means {}, anything else stays the raw text."""
    assert expected == parse_arguments(raw)


def test_raw_arguments_are_sent_back_unchanged() -> None:
    """Arguments kept as raw text go back to the server as that same text."""
    assert '{"limit": ' == arguments_text('{"limit": ')


def test_dict_arguments_are_sent_as_json_text() -> None:
    """Dict arguments are sent as JSON text, non-ASCII kept readable."""
    assert '{"message": "Müll"}' == arguments_text({"message": "Müll"})
