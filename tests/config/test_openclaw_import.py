"""openclaw-sentinel watchers → Sentinel watchers: what maps, what is reported, what is refused.

The upstream examples are written from the shapes its README and docs/USAGE.md document
(coffeexcoin/openclaw-sentinel, src/types.ts ``WatcherDefinition``).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from ruamel.yaml import YAML

from sentinel_hooks.config.openclaw import NotOpenclawError, convert_watcher, read_watchers, watcher_yaml
from sentinel_hooks.config.openclaw.convert import Conversion
from sentinel_hooks.config.watcher import WATCHER_ADAPTER

ETH_PRICE: dict[str, Any] = {
    "id": "eth-price-watch",
    "skillId": "skills.alerts",
    "enabled": True,
    "strategy": "http-poll",
    "endpoint": "https://api.coingecko.com/api/v3/simple/price?ids=ethereum&vs_currencies=usd",
    "intervalMs": 15000,
    "match": "all",
    "conditions": [{"path": "ethereum.usd", "op": "gte", "value": 5000}],
    "fire": {
        "webhookPath": "/hooks/sentinel",
        "eventName": "eth_target_hit",
        "intent": "price_threshold_review",
        "contextTemplate": {"asset": "ETH", "priceUsd": "${payload.ethereum.usd}", "workflow": "alerts"},
        "priority": "high",
        "sessionGroup": "portfolio-risk",
        "operatorGoal": "Confirm threshold breach, summarize impact, and notify on-call.",
        "deadlineTemplate": "${timestamp}",
        "payloadTemplate": {
            "event": "${event.name}",
            "price": "${payload.ethereum.usd}",
            "ts": "${timestamp}",
        },
    },
    "retry": {"maxRetries": 5, "baseMs": 500, "maxMs": 15000},
    "fireOnce": True,
    "deliveryTargets": [
        {"channel": "telegram", "to": "5613673222"},
        {"channel": "discord", "to": "123456789012345678", "accountId": "main"},
    ],
}

AUCTION: dict[str, Any] = {
    "id": "assembly-autobid",
    "skillId": "skills.defi",
    "enabled": True,
    "strategy": "evm-call",
    "endpoint": "https://eth-mainnet.g.alchemy.com/v2/KEY",
    "intervalMs": 15000,
    "match": "all",
    "conditions": [{"path": "resultNamed.settled", "op": "eq", "value": False}],
    "fire": {
        "webhookPath": "/hooks/sentinel",
        "eventName": "auction_active",
        "operatorGoal": "Evaluate the auction state and place a bid if appropriate.",
        "operatorGoalFile": "~/.openclaw/policies/bidding-policy.json",
        "payloadTemplate": {
            "event": "${event.name}",
            "highestBid": "${payload.resultNamed.highestBid}",
            "first": "${payload.result.0}",
            "contract": "${payload.to}",
        },
    },
    "retry": {"maxRetries": 5, "baseMs": 500, "maxMs": 15000},
    "evmCall": {
        "to": "0x1234567890abcdef1234567890abcdef12345678",
        "signature": "function auction() view returns (uint256 highestBid, bool settled)",
    },
}


def upstream(**changes: Any) -> dict[str, Any]:
    watcher = copy.deepcopy(ETH_PRICE)
    watcher.update(changes)
    return watcher


def notes(conversion: Conversion, kind: str | None = None) -> dict[str, str]:
    return {n.path: n.reason for n in conversion.notes if kind is None or n.kind == kind}


def test_readme_watcher_maps_every_field_it_can() -> None:
    """The README's first watcher becomes the Sentinel watcher of SPEC §2.2, keys in its order."""
    conversion = convert_watcher(ETH_PRICE, skills={"skills.alerts"})
    assert {
        "id": "eth-price-watch",
        "skillId": "skills.alerts",
        "enabled": True,
        "strategy": "http-poll",
        "endpoint": ETH_PRICE["endpoint"],
        "intervalMs": 15000,
        "timeoutMs": 15000,
        "match": "all",
        "conditions": [{"path": "ethereum.usd", "op": "gte", "value": 5000}],
        "fire": {
            "eventName": "eth_target_hit",
            "intent": "price_threshold_review",
            "priority": "high",
            "operatorGoal": "Confirm threshold breach, summarize impact, and notify on-call.",
            "sessionGroup": "portfolio-risk",
            "payloadTemplate": {
                "event": "${event.name}",
                "price": "${payload.ethereum.usd}",
                "ts": "${timestamp}",
            },
            "contextTemplate": {"asset": "ETH", "priceUsd": "${payload.ethereum.usd}", "workflow": "alerts"},
        },
        "retry": {"maxRetries": 5, "baseMs": 500, "maxMs": 15000},
        "fireOnce": True,
    } == conversion.watcher
    assert conversion.watcher is not None
    assert list(conversion.watcher)[:4] == ["id", "skillId", "enabled", "strategy"]


def test_fields_without_counterpart_are_reported_with_a_hint() -> None:
    """deadlineTemplate and each delivery target are reported; the hint names a target to add."""
    dropped = notes(convert_watcher(ETH_PRICE, skills={"skills.alerts"}), "dropped")
    assert {"fire.deadlineTemplate", "deliveryTargets[0]", "deliveryTargets[1]"} == set(dropped)
    assert "hookResponseTimeoutMs" in dropped["fire.deadlineTemplate"]
    assert (
        'type: apprise, urls: ["tgram://${env:TELEGRAM_BOT_TOKEN}/5613673222"]'
        in dropped["deliveryTargets[0]"]
    )
    assert "accountId 'main'" in dropped["deliveryTargets[1]"]


def test_slack_delivery_target_hints_a_slack_target() -> None:
    """A Slack chat maps to a slack target with that channel."""
    conversion = convert_watcher(upstream(deliveryTargets=[{"channel": "slack", "to": "#ops"}]))
    assert (
        'type: slack, token: "${env:SLACK_BOT_TOKEN}", channel: "#ops"'
        in notes(conversion)["deliveryTargets[0]"]
    )


def test_skill_the_project_lacks_is_dropped_and_its_value_kept_in_templates() -> None:
    """skillId needs skills/<id>/SKILL.md in Sentinel; `${watcher.skillId}` keeps upstream's value."""
    watcher = upstream()
    watcher["fire"]["payloadTemplate"]["skill"] = "${watcher.skillId}"
    conversion = convert_watcher(watcher, skills=())
    assert conversion.watcher is not None
    assert "skillId" not in conversion.watcher
    assert "skills.alerts" == conversion.watcher["fire"]["payloadTemplate"]["skill"]
    assert "skills/skills.alerts/SKILL.md" in notes(conversion, "dropped")["skillId"]


def test_other_webhook_route_is_reported_default_route_is_not() -> None:
    """/hooks/sentinel is what Sentinel does; /hooks/agent has no counterpart."""
    assert "fire.webhookPath" not in notes(convert_watcher(ETH_PRICE))
    watcher = upstream()
    watcher["fire"]["webhookPath"] = "/hooks/agent"
    assert "'/hooks/agent'" in notes(convert_watcher(watcher), "dropped")["fire.webhookPath"]


def test_default_intent_is_upstreams() -> None:
    """Without intent, upstream derived one from eventName; it is written out when it differs."""
    watcher = upstream()
    del watcher["fire"]["intent"]
    watcher["fire"]["eventName"] = "ETH Target Hit!"
    conversion = convert_watcher(watcher)
    assert conversion.watcher is not None
    assert "eth_target_hit" == conversion.watcher["fire"]["intent"]


def test_metadata_becomes_tags_except_the_origin_chat() -> None:
    """metadata entries become key=value tags; the origin-chat keys are reported."""
    conversion = convert_watcher(
        upstream(tags=["defi"], metadata={"team": "risk", "openclaw.sentinel.origin.to": "5613673222"})
    )
    assert conversion.watcher is not None
    assert ["defi", "team=risk"] == conversion.watcher["tags"]
    assert "metadata.openclaw.sentinel.origin.to" in notes(conversion, "dropped")


def test_unknown_fields_are_reported() -> None:
    """A key upstream does not have either is reported, not silently lost."""
    watcher = upstream(schedule="*/5 * * * *")
    watcher["fire"]["webhookUrl"] = "https://x"
    assert {"schedule", "fire.webhookUrl"} <= set(notes(convert_watcher(watcher), "dropped"))


def test_evm_call_paths_follow_sentinels_observation() -> None:
    """resultNamed.<name> → outputs.<position>, result.N → outputs.N, payload.to → the address."""
    conversion = convert_watcher(AUCTION)
    watcher = conversion.watcher
    assert watcher is not None
    assert {
        "to": AUCTION["evmCall"]["to"],
        "signature": "auction() returns (uint256 highestBid, bool settled)",
    } == (watcher["evmCall"])
    assert [{"path": "outputs.1", "op": "eq", "value": False}] == watcher["conditions"]
    assert {
        "event": "${event.name}",
        "highestBid": "${payload.outputs.0}",
        "first": "${payload.outputs.0}",
        "contract": AUCTION["evmCall"]["to"],
    } == watcher["fire"]["payloadTemplate"]
    assert "fire.operatorGoalFile" in notes(conversion, "dropped")


def test_evm_call_decimal_string_compared_as_number() -> None:
    """Upstream compared uint256 as decimal strings; Sentinel observes numbers, so `eq "100"` → 100."""
    watcher = copy.deepcopy(AUCTION)
    watcher["conditions"] = [{"path": "resultNamed.highestBid", "op": "eq", "value": "100"}]
    conversion = convert_watcher(watcher)
    assert conversion.watcher is not None
    assert [{"path": "outputs.0", "op": "eq", "value": 100}] == conversion.watcher["conditions"]


def test_lost_condition_disables_the_watcher() -> None:
    """A condition that cannot be carried is reported, and the watcher is written disabled."""
    watcher = copy.deepcopy(AUCTION)
    watcher["conditions"].append({"path": "raw", "op": "changed"})
    conversion = convert_watcher(watcher)
    assert conversion.watcher is not None
    assert (False, [{"path": "outputs.1", "op": "eq", "value": False}]) == (
        conversion.watcher["enabled"],
        conversion.watcher["conditions"],
    )
    assert {"conditions[1]", "enabled"} <= set(notes(conversion))


@pytest.mark.parametrize(
    "condition",
    [{"path": "status", "op": "matches", "value": "(unclosed"}, {"path": "status", "op": "contains"}],
    ids=["bad-regex", "no-value"],
)
def test_condition_sentinel_refuses_is_dropped_and_watcher_disabled(condition: dict[str, Any]) -> None:
    """What Sentinel's own validation refuses is dropped with its message; the rest still imports."""
    conversion = convert_watcher(upstream(conditions=[{"path": "ok", "op": "eq", "value": 1}, condition]))
    assert conversion.watcher is not None
    assert (False, [{"path": "ok", "op": "eq", "value": 1}]) == (
        conversion.watcher["enabled"],
        conversion.watcher["conditions"],
    )
    reasons = [
        reason for path, reason in notes(conversion, "dropped").items() if path.startswith("conditions[1]")
    ]
    assert ["Sentinel refuses it"] == [reason[:19] for reason in reasons]


def test_websocket_and_sse_keep_what_they_have() -> None:
    """websocket takes ws(s) URLs; sse and websocket have no interval, timeout, method or body."""
    ws = convert_watcher(
        upstream(strategy="websocket", endpoint="https://stream.example.com/ws", timeoutMs=5000)
    )
    assert ws.watcher is not None
    assert "wss://stream.example.com/ws" == ws.watcher["endpoint"]
    assert {"intervalMs", "timeoutMs"} <= set(notes(ws, "dropped"))
    sse = convert_watcher(upstream(strategy="sse", endpoint="https://x.example.com/events", method="GET"))
    assert sse.watcher is not None
    assert {"intervalMs", "method"} <= set(notes(sse, "dropped"))
    assert "retry backoff" in notes(sse)["intervalMs"]


def test_long_poll_keeps_request_and_timeout() -> None:
    """http-long-poll has its Sentinel namesake: method, headers, body and timeoutMs carry over."""
    conversion = convert_watcher(
        upstream(
            strategy="http-long-poll", method="POST", body='{"q":1}', headers={"A": "b"}, timeoutMs=55000
        )
    )
    assert conversion.watcher is not None
    assert {"method": "POST", "headers": {"A": "b"}, "body": '{"q":1}', "timeoutMs": 55000} == {
        key: conversion.watcher[key] for key in ("method", "headers", "body", "timeoutMs")
    }


def test_interval_below_the_floor_is_raised() -> None:
    """An interval under limits.minIntervalMs would fail validate: raised, and reported."""
    conversion = convert_watcher(upstream(intervalMs=200), min_interval_ms=1000)
    assert conversion.watcher is not None
    assert 1000 == conversion.watcher["intervalMs"]
    assert "intervalMs" in notes(conversion, "changed")


def test_header_placeholder_gets_a_hint() -> None:
    """USAGE.md's `Bearer ${secrets.github_pat}` is sent as written; the hint says ${env:…}."""
    conversion = convert_watcher(upstream(headers={"Authorization": "Bearer ${secrets.github_pat}"}))
    assert "${env:NAME}" in notes(conversion, "hint")["headers.Authorization"]


@pytest.mark.parametrize(
    ("change", "path"),
    [({"strategy": "grpc"}, "strategy"), ({"id": "bad id!"}, "id"), ({"endpoint": "ftp://x"}, "endpoint")],
)
def test_watcher_that_cannot_be_carried_is_skipped_with_reason(change: dict[str, Any], path: str) -> None:
    """An unknown strategy, an invalid id or endpoint: nothing written, the reason reported."""
    conversion = convert_watcher(upstream(**change))
    assert conversion.watcher is None
    assert notes(conversion, "dropped")[path].startswith("not imported")


@pytest.mark.parametrize("source", [ETH_PRICE, AUCTION], ids=["http-poll", "evm-call"])
def test_written_yaml_is_a_valid_watcher(source: dict[str, Any]) -> None:
    """The file's YAML loads back to the converted watcher, which Sentinel's model accepts."""
    conversion = convert_watcher(source)
    text = watcher_yaml(conversion, "state.json")
    loaded = YAML(typ="safe", pure=True).load(text)
    assert conversion.watcher == loaded
    WATCHER_ADAPTER.validate_python(loaded)
    assert text.startswith("# Imported by `sentinel import openclaw` from state.json")
    assert "fire.deadlineTemplate" in text or source is AUCTION


STATE = {
    "watchers": [ETH_PRICE, AUCTION],
    "runtime": {"eth-price-watch": {"id": "x"}},
    "updatedAt": "2026-03-04",
}


@pytest.mark.parametrize(
    ("document", "ids"),
    [
        (STATE, ["eth-price-watch", "assembly-autobid"]),
        ([ETH_PRICE, AUCTION], ["eth-price-watch", "assembly-autobid"]),
        (ETH_PRICE, ["eth-price-watch"]),
        ({"action": "create", "watcher": AUCTION}, ["assembly-autobid"]),
    ],
    ids=["state-file", "list", "one", "sentinel_control"],
)
def test_every_upstream_document_shape_is_read(document: Any, ids: list[str]) -> None:
    """A state file, a list, one watcher and a sentinel_control create call are all recognised."""
    assert ids == [w["id"] for w in read_watchers(json.dumps(document), name="f.json")]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("id: x\nstrategy: http-poll\n", "f.json is not JSON (Expecting value at line 1 column 1)"),
        ('{"groups": []}', "is not openclaw-sentinel JSON (its keys: groups)"),
        ('{"plugins": {"entries": {}}}', "looks like OpenClaw's own config"),
        ('[{"id": "a", "strategy": "sse"}, {"name": "b"}]', "[1] is not an openclaw-sentinel watcher"),
        ('{"watchers": []}', "holds no watchers"),
        ("42", "holds a JSON int"),
    ],
    ids=["yaml", "other-json", "openclaw-config", "stray-item", "empty", "number"],
)
def test_other_input_is_refused_with_one_line(text: str, message: str) -> None:
    """Not JSON, or JSON of something else: NotOpenclawError with a one-line message."""
    with pytest.raises(NotOpenclawError) as caught:
        read_watchers(text, name="f.json")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
