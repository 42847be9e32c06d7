"""The callback envelope: shape, ids, dedupe keys, truncation, redaction."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from sentinel_hooks.callbacks.sessions.prompt import user_message
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.config.watcher import WATCHER_ADAPTER, AnyWatcher
from sentinel_hooks.core.envelope import (
    TRUNCATED_KEY,
    Envelope,
    default_dedupe_key,
    envelope_json_schema,
    truncate_payload,
)
from sentinel_hooks.store import codec
from sentinel_hooks.watchers.builder import Firing, build_envelope

AT = datetime(2026, 3, 1, 12, 0, 0, 250000, tzinfo=UTC)


def watcher(**extra: Any) -> AnyWatcher:
    data = {
        "id": "eth",
        "strategy": "http-poll",
        "endpoint": "https://api.example.com/p",
        "intervalMs": 15000,
        "conditions": [{"path": "usd", "op": "lt", "value": 2000}],
        "fire": {"eventName": "eth_low", "priority": "high", "operatorGoal": "look"},
        "deliveryTargets": ["oncall"],
        "tags": ["defi"],
    }
    data.update(extra)
    return WATCHER_ADAPTER.validate_python(data)


def test_envelope_has_the_spec_shape() -> None:
    """Every top-level key of SPEC §7, camelCase, with the watcher's facts."""
    envelope = build_envelope(watcher(), ServiceConfig(), Firing("match", {"usd": 1999}, AT)).to_json()
    assert [
        "type",
        "version",
        "callbackId",
        "watcher",
        "trigger",
        "mode",
        "operatorGoalRuntimeContext",
        "context",
        "payload",
        "delivery",
        "source",
    ] == list(envelope)
    assert ("sentinel.callback", "1") == (envelope["type"], envelope["version"])
    assert {
        "id": "eth",
        "skillId": None,
        "eventName": "eth_low",
        "intent": "eth_low",
        "strategy": "http-poll",
        "endpoint": "https://api.example.com/p",
        "match": "all",
        "conditions": [{"path": "usd", "op": "lt", "value": 2000}],
        "fireOnce": False,
        "tags": ["defi"],
    } == envelope["watcher"]
    assert "2026-03-01T12:00:00.250Z" == envelope["trigger"]["matchedAt"]
    assert {"targets": ["oncall"], "timeoutMs": 30000, "fallbackMode": "concise"} == envelope["delivery"]
    assert {"service": "sentinel", "route": "watcher"} == envelope["source"]
    assert {"environment": "prod", "operatorGoal": "look", "autonomy": "act"} == envelope["mode"]


def test_callback_ids_are_ulids_and_unique() -> None:
    """Each envelope gets a fresh 26-character ULID."""
    ids = {build_envelope(watcher(), ServiceConfig(), Firing("match", {}, AT)).callback_id for _ in range(50)}
    assert 50 == len(ids)
    assert all(26 == len(i) for i in ids)


def test_default_dedupe_key_is_deterministic() -> None:
    """Same watcher, event and payload (any key order, 1 vs 1.0) → same key; other payload → other key."""
    first = default_dedupe_key("eth", "eth_low", {"a": 1, "b": [1, 2]})
    assert first == default_dedupe_key("eth", "eth_low", {"b": [1.0, 2], "a": 1.0})
    assert first != default_dedupe_key("eth", "eth_low", {"a": 2, "b": [1, 2]})
    assert 64 == len(first)


def test_dedupe_key_template_wins() -> None:
    """fire.dedupeKeyTemplate renders the dedupe key."""
    spec = watcher(fire={"eventName": "e", "dedupeKeyTemplate": "eth-${payload.day}"})
    envelope = build_envelope(spec, ServiceConfig(), Firing("match", {"day": "2026-03-01"}, AT))
    assert "eth-2026-03-01" == envelope.trigger.dedupe_key


def test_context_merges_context_template_over_payload_template() -> None:
    """context = payloadTemplate rendered, contextTemplate's keys win."""
    spec = watcher(
        fire={
            "eventName": "e",
            "payloadTemplate": {"price": "${payload.usd}", "asset": "x"},
            "contextTemplate": {"asset": "ETH"},
        }
    )
    envelope = build_envelope(spec, ServiceConfig(), Firing("match", {"usd": 1999.5}, AT))
    assert {"price": 1999.5, "asset": "ETH"} == envelope.context


def test_large_payload_is_truncated_with_marker() -> None:
    """A payload over limits.maxPayloadChars becomes a marked preview of that many characters."""
    payload = {"items": ["x" * 100] * 100}
    truncated = truncate_payload(payload, 500)
    assert truncated[TRUNCATED_KEY] is True
    assert 500 == len(truncated["preview"])
    assert truncated["originalChars"] > 500


def test_small_payload_is_kept() -> None:
    """A payload that fits is unchanged."""
    assert {"a": 1} == truncate_payload({"a": 1}, 100)


def test_secrets_are_redacted_from_the_envelope() -> None:
    """A secret value observed in the payload is masked."""
    firing = Firing("match", {"echo": "token s3cret-value"}, AT)
    envelope = build_envelope(watcher(), ServiceConfig(), firing, redactor=Redactor(["s3cret-value"]))
    assert {"echo": "token ***"} == envelope.payload


def test_an_envelope_without_a_secret_in_it_is_not_validated_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Redaction that masks nothing keeps the envelope as built (one validation per fire)."""
    redactor = Redactor(["s3cret-value"])
    validated: list[Envelope] = []
    original = Envelope.model_validate

    def counting(data: Any) -> Envelope:
        validated.append(original(data))
        return validated[-1]

    monkeypatch.setattr(Envelope, "model_validate", counting)
    plain = build_envelope(watcher(), ServiceConfig(), Firing("match", {"usd": 1999}, AT), redactor=redactor)
    masked = build_envelope(
        watcher(), ServiceConfig(), Firing("match", {"k": "s3cret-value"}, AT), redactor=redactor
    )
    assert plain.payload == {"usd": 1999}
    assert masked.payload == {"k": "***"}
    assert validated == [masked]


def test_an_envelope_is_serialised_once_per_fire(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its secret check, the store's record and the prompt use one wire text, made once."""
    made: list[str] = []
    original = Envelope.model_dump_json

    def counting(self: Envelope, **kwargs: Any) -> str:
        made.append(self.callback_id)
        return original(self, **kwargs)

    monkeypatch.setattr(Envelope, "model_dump_json", counting)
    redactor = Redactor(["s3cret-value"])
    envelope = build_envelope(
        watcher(), ServiceConfig(), Firing("match", {"usd": 1999}, AT), redactor=redactor
    )
    stored = codec.dump_envelope(envelope)
    prompt = user_message(envelope, skill=None, tools=[])["content"]
    assert ([envelope.callback_id], envelope) == (made, codec.load_envelope(stored))
    assert stored in prompt


@pytest.mark.parametrize(
    "payload",
    [
        {"usd": 1999, "name": "é ü \u2028 </x>", "list": [1, 2.5, None, True], "big": 2**70},
        {"at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "tuple": (1, 2), "tiny": 1e-7, "huge": 1e16},
        {"text": "NaN and Infinity are words here"},
        {"lone": "\ud800"},
    ],
)
def test_the_wire_text_is_json_of_the_envelope(payload: dict[str, Any]) -> None:
    """Whichever serialiser writes it, the wire text reads back as the envelope's JSON form."""
    envelope = build_envelope(watcher(), ServiceConfig(), Firing("match", payload, AT))
    assert json.loads(envelope.wire_text()) == envelope.to_json()


def test_a_non_finite_number_in_the_payload_is_not_json() -> None:
    """NaN and the infinities have no JSON: the wire text is refused (the store says so)."""
    for value in (float("nan"), float("inf"), float("-inf")):
        envelope = build_envelope(watcher(), ServiceConfig(), Firing("match", {"v": value}, AT))
        with pytest.raises(ValueError, match="not JSON compliant"):
            envelope.wire_text()


def test_an_envelope_s_wire_text_is_not_part_of_its_value() -> None:
    """An envelope that made its wire text equals one that did not; a copy with changes makes its own."""
    envelope = build_envelope(watcher(), ServiceConfig(), Firing("match", {"usd": 1999}, AT))
    fresh = Envelope.model_validate_json(envelope.wire_text())
    moved = envelope.model_copy(update={"callback_id": "other-id"})
    assert (envelope, envelope.wire_text()) == (fresh, fresh.wire_text())
    assert '"callbackId":"other-id"' in moved.wire_text()


def test_a_literal_url_password_is_masked_in_the_envelope() -> None:
    """A password written in the endpoint (an API-created watcher can only hold literals) is ``***``."""
    spec = watcher(endpoint="https://bob:hunter2pass@api.example.com/p")
    envelope = build_envelope(spec, ServiceConfig(), Firing("match", {"usd": 1999}, AT))
    assert "https://bob:***@api.example.com/p" == envelope.watcher.endpoint


def test_external_envelope_validation() -> None:
    """An envelope from another system is validated strictly (unknown keys refused)."""
    minimal = {
        "watcher": {"id": "ext", "eventName": "deploy"},
        "trigger": {"matchedAt": "2026-01-01T00:00:00Z"},
    }
    assert "ext" == Envelope.model_validate(minimal).watcher.id
    with pytest.raises(ValidationError):
        Envelope.model_validate({**minimal, "bogus": 1})
    with pytest.raises(ValidationError):
        Envelope.model_validate({**minimal, "callbackId": "not an id"})


def test_json_schema_is_exported() -> None:
    """The envelope's JSON Schema names its camelCase properties."""
    schema = envelope_json_schema()
    assert {"callbackId", "watcher", "trigger", "payload"} <= set(schema["properties"])


def test_a_matched_at_before_the_year_1000_reads_back() -> None:
    """matchedAt in the year 30 is kept with four digits of year, so the stored envelope validates
    again when read back (it was written '30-10-24T…', which no ISO reader takes)."""
    minimal = {
        "watcher": {"id": "ext", "eventName": "deploy"},
        "trigger": {"matchedAt": "0030-10-24T09:22:19.23Z"},
    }
    envelope = Envelope.model_validate(minimal)
    again = Envelope.model_validate(envelope.to_json())
    assert ("0030-10-24T09:22:19.230Z", envelope) == (envelope.trigger.matched_at, again)


def test_a_delivery_timeout_past_a_year_and_a_day_is_refused() -> None:
    """delivery.timeoutMs is at most a year and a day: a deadline further out cannot be computed."""
    minimal = {
        "watcher": {"id": "ext", "eventName": "deploy"},
        "trigger": {"matchedAt": "2026-01-01T00:00:00Z"},
    }
    with pytest.raises(ValidationError, match="timeoutMs"):
        Envelope.model_validate({**minimal, "delivery": {"timeoutMs": 10**20}})
