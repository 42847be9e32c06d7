"""allowedHosts matching, env interpolation and redaction."""

from __future__ import annotations

import pytest

from sentinel_hooks.config.envvars import interpolate
from sentinel_hooks.config.hosts import host_allowed, normalise_ip
from sentinel_hooks.config.secrets import Redactor


@pytest.mark.parametrize(
    ("host", "allowed", "expected"),
    [
        ("api.example.com", ["api.example.com"], True),
        ("API.Example.com", ["api.example.com"], True),
        ("api.example.com.", ["api.example.com"], True),
        ("evil-api.example.com", ["api.example.com"], False),
        ("a.example.com", ["*.example.com"], True),
        ("a.b.example.com", ["*.example.com"], True),
        ("example.com", ["*.example.com"], False),
        ("badexample.com", ["*.example.com"], False),
        ("127.0.0.1", ["127.0.0.1"], True),
        ("::ffff:127.0.0.1", ["127.0.0.1"], True),
        ("10.1.2.3", ["10.0.0.0/8"], True),
        ("11.1.2.3", ["10.0.0.0/8"], False),
        ("::1", ["[::1]"], True),
        ("127.0.0.1", ["localhost"], False),
        ("anything", [], False),
    ],
)
def test_host_allowed(host: str, allowed: list[str], expected: bool) -> None:
    """Exact names, *.suffix, IP literals (normalised) and CIDRs."""
    assert expected == host_allowed(host, allowed)


def test_ipv4_mapped_ipv6_normalises_to_ipv4() -> None:
    """::ffff:10.0.0.1 is 10.0.0.1."""
    assert normalise_ip("10.0.0.1") == normalise_ip("[::ffff:10.0.0.1]")


def test_interpolation_collects_secrets_not_defaults() -> None:
    """Values from the environment are secrets; defaults written in the file are not."""
    result = interpolate({"a": "${env:A}", "b": ["x-${env:B:-fallback}"]}, {"A": "alpha-secret"})
    assert {"a": "alpha-secret", "b": ["x-fallback"]} == result.data
    assert {"alpha-secret"} == result.secrets
    assert [] == result.problems


def test_interpolation_reports_malformed_reference() -> None:
    """`${env:}` and similar are reported, not silently kept."""
    result = interpolate({"a": "${env:1BAD}"}, {})
    assert [("a",)] == [loc for loc, _ in result.problems]


def test_keys_are_not_interpolated() -> None:
    """Only values are interpolated."""
    assert {"${env:A}": "v"} == interpolate({"${env:A}": "v"}, {"A": "x"}).data


def test_redactor_masks_nested_data_and_skips_short_values() -> None:
    """Secrets are masked in strings, keys and nested lists; values under 4 chars are left alone."""
    redactor = Redactor(["tok-123", "on"])
    masked = redactor.data({"k": ["Bearer tok-123", 1], "tok-123": "on"})
    assert {"k": ["Bearer ***", 1], "***": "on"} == masked


def test_redactor_masks_a_secret_percent_encoded_or_escaped() -> None:
    """A secret echoed percent-encoded (``%2F``, ``%2f``, ``+``), HTML-escaped or JSON-escaped is masked."""
    redactor = Redactor(["a/b c&d"])
    echoed = ["a%2Fb%20c%26d", "a%2fb+c%26d", "a/b c&amp;d", "a\\/b c&d", "a/b%20c&d"]
    assert ["key=***;"] * 5 == [redactor.text(f"key={form};") for form in echoed]


def test_redactor_leaves_plain_text_around_a_secret() -> None:
    """Only the secret is replaced; letters keep their case (encodings are matched, not the text)."""
    redactor = Redactor(["Tok3n-Value"])
    assert "GET /x?k=*** and tok3n-value" == redactor.text("GET /x?k=Tok3n-Value and tok3n-value")
