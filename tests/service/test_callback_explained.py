"""`sentinel callbacks show` explains a fire: the conditions with the values they saw (kept with the
fire, since the watcher's later observations say nothing about this one), how it ended."""

from __future__ import annotations

from pathlib import Path

from sentinel_hooks.cli.callbacks import _approval_of
from tests.cli.conftest import remote_lines
from tests.service.conftest import Starter
from tests.service.test_api import call

WATCHER = """\
id: gas
strategy: webhook
match: all
conditions:
  - {path: gwei, op: gt, value: 150}
  - {path: chain, op: eq, value: mainnet}
  - {path: note, op: absent}
  - {path: blob, op: exists}
deliveryTargets: [console]
fire: {eventName: gas_high}
"""


async def test_a_match_is_shown_with_each_condition_and_its_actual_value(
    start_service: Starter, tmp_path: Path
) -> None:
    service = await start_service(watchers={"gas.yaml": WATCHER})
    blob = "x" * 500  # a long actual value is kept cut
    payload = {"gwei": 182, "chain": "mainnet", "blob": blob}
    status, accepted = await call(service, "POST", "/hooks/ingest/gas", body=payload)
    assert (202, True) == (status, accepted["fired"])
    [contract] = (await service.store.list_contracts(watcher_id="gas")).items
    callback_id = contract.callback_id
    status, body = await call(service, "GET", f"/api/v1/callbacks/{callback_id}")
    assert 200 == status
    by_path = {c["path"]: c for c in body["conditions"]}
    assert (182, True) == (by_path["gwei"]["actual"], by_path["gwei"]["result"])
    assert (None, True, True) == (
        by_path["note"]["actual"],
        by_path["note"]["missing"],
        by_path["note"]["result"],
    )
    cut = by_path["blob"]["actual"]
    assert (200, "…") == (len(cut), cut[-1])

    lines = await remote_lines(service.url, tmp_path, "callbacks", "show", callback_id)
    assert lines[0].startswith("gas_high fired on gas (match, ")
    start = lines.index("conditions (match all):")
    assert [
        "✓ gwei gt 150 — actual 182",
        '✓ chain eq "mainnet" — actual "mainnet"',
        "✓ note absent — actual missing",
    ] == lines[start + 1 : start + 4]
    assert lines[start + 4].startswith('✓ blob exists — actual "\\"xxx')


async def test_a_manual_fire_has_no_conditions(start_service: Starter) -> None:
    """A manual fire skips the conditions: there is nothing to explain (null, not an empty list)."""
    service = await start_service(watchers={"gas.yaml": WATCHER})
    status, accepted = await call(service, "POST", "/api/v1/watchers/gas/fire", body={"payload": {}})
    assert 202 == status
    _, body = await call(service, "GET", f"/api/v1/callbacks/{accepted['callbackId']}")
    assert body["conditions"] is None


def test_a_tool_result_names_who_decided_its_approval() -> None:
    approved = '{"ok": true, "approval": {"status": "approved", "by": "alice", "note": "go"}}'
    assert " (approval approved by alice: 'go')" == _approval_of(approved)
    assert "" == _approval_of('{"ok": true}')
    assert "" == _approval_of("not json")
