"""allowedHosts matching, env interpolation and redaction."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from sentinel_hooks.config.envvars import interpolate
from sentinel_hooks.config.hosts import host_allowed, normalise_ip, url_host, url_origin
from sentinel_hooks.config.secrets import Redactor, masked_credentials
from sentinel_hooks.config.watcher import WATCHER_ADAPTER


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


def json_values(strings: str, keys: str) -> st.SearchStrategy[object]:
    """JSON-like values whose strings are made of ``strings`` and whose keys of ``keys``."""
    return st.recursive(
        st.none() | st.integers() | st.text(alphabet=strings, max_size=8),
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(st.text(alphabet=keys, max_size=4), children, max_size=3)
        ),
        max_leaves=8,
    )


@given(json_values('ab/%2f&\\"\x00', "ab/\x00"), st.sampled_from(["ab/ab", 'a&b"b', "ab\x00ab", "abab"]))
def test_redactor_finds_a_secret_exactly_where_data_masks_one(value: object, secret: str) -> None:
    """found_in (one search of the strings joined) agrees with data: never across two strings."""
    redactor = Redactor([secret])
    assert redactor.found_in(value) == (redactor.data(value) != value)


@given(
    json_values('ab/\\"\n\x01\u2028', 'ab"\n'),
    st.sampled_from(['a"b\\', "ab\nab", "a\x01ba", "ab\u2028b", "a/b/"]),
)
def test_a_secret_data_would_mask_is_found_in_the_value_s_json_text(value: object, secret: str) -> None:
    """JSON escapes (quote, backslash, control characters) are spellings of the secret: a value's
    JSON text, searched once, shows every secret ``data`` masks in the value."""
    redactor = Redactor([secret])
    if redactor.data(value) != value:
        assert redactor.found_in(json.dumps(value, ensure_ascii=False))


def test_redactor_finds_secrets_in_keys_and_escaped_but_not_across_strings() -> None:
    redactor = Redactor(["bench-token"])
    assert redactor.found_in({"a": [{"x": "Bearer bench-token"}]})
    assert redactor.found_in({"bench%2Dtoken": 1})
    assert not redactor.found_in({"a": ["bench-", "token"], "bench-": "token"})
    assert not Redactor([]).found_in({"bench-token": "bench-token"})


def test_redactor_leaves_plain_text_around_a_secret() -> None:
    """Only the secret is replaced; letters keep their case (encodings are matched, not the text)."""
    redactor = Redactor(["Tok3n-Value"])
    assert "GET /x?k=*** and tok3n-value" == redactor.text("GET /x?k=Tok3n-Value and tok3n-value")


def _split_host(url: str) -> str | None:
    try:
        return urlsplit(url).hostname
    except ValueError:
        return None


_URL_PARTS = st.sampled_from(
    ["http", "HTTP", "https", "ws", "redis", " http", "h1+x.y-z", "1http", "", "http:", "mailto"]
)
_HOST_TEXT = st.text(alphabet="ab1.:@[]/?#\\ \t\n%é-_", max_size=12)


@given(scheme=_URL_PARTS, host=_HOST_TEXT, rest=_HOST_TEXT)
def test_a_remembered_origin_reads_as_the_whole_url_does(scheme: str, host: str, rest: str) -> None:
    """url_host and a watcher's endpoint check remember verdicts per origin (``url_origin``);
    for any text they must find what ``urlsplit`` of the whole URL finds."""
    url = f"{scheme}://{host}{rest}"
    assert _split_host(url) == url_host(url)
    try:
        parts = urlsplit(url)
        expected = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        expected = False
    watcher = {"id": "w", "strategy": "http-poll", "endpoint": url, "intervalMs": 1000}
    try:
        WATCHER_ADAPTER.validate_python(watcher)
        accepted = True
    except ValidationError:
        accepted = False
    assert expected == accepted, url


def test_url_origin_is_the_scheme_and_host_part_only_when_plain() -> None:
    assert "https://api.example.com:8443" == url_origin("https://api.example.com:8443/v1?q=1")
    assert "http://h" == url_origin("http://h")
    for unplain in ("HTTP://h/", " http://h/", "http://a\tb/c", "http://h\\x/", "http:/h", "http://"):
        assert url_origin(unplain) is None, unplain


@pytest.mark.parametrize(
    ("definition", "masked"),
    [
        ({"strategy": "webhook", "secret": "abc"}, {"secret": "***"}),
        ({"strategy": "webhook", "auth": {"bearerToken": "tok"}}, {"auth": {"bearerToken": "***"}}),
        (
            {"strategy": "webhook", "auth": {"basic": {"username": "am", "password": "pw"}}},
            {"auth": {"basic": {"username": "am", "password": "***"}}},
        ),
        ({"strategy": "webhook", "auth": "none"}, {"auth": "none"}),
        (
            {
                "strategy": "http-poll",
                "intervalMs": 60000,
                "endpoint": "https://bob:pa55@api.example.com/x?q=a:b@c",
                "headers": {"authorization": "Bearer t0k", "Accept": "application/json"},
            },
            {
                "endpoint": "https://bob:***@api.example.com/x?q=a:b@c",
                "headers": {"authorization": "***", "Accept": "application/json"},
            },
        ),
        (
            {"strategy": "redis-pubsub", "redisUrl": "redis://:hunter2@cache.internal/0", "channel": "c"},
            {"redisUrl": "redis://:***@cache.internal/0", "channel": "c"},
        ),
    ],
)
def test_credentials_of_a_definition_are_masked_by_key(
    definition: dict[str, object], masked: dict[str, object]
) -> None:
    """Credentials are masked whatever their length and wherever they came from; the rest is kept."""
    data = {"id": "w", "deliveryTargets": [], **definition}
    shown = masked_credentials(WATCHER_ADAPTER.validate_python(data), data)
    assert data | masked == shown
