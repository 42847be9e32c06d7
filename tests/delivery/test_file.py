"""The file target: durable JSON lines, parents created, concurrent sends never interleave."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.clock import FakeClock
from sentinel_hooks.delivery.targets.base import DeliveryError
from tests.delivery.conftest import MakeTarget, message


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


async def test_appends_one_json_line(make_target: MakeTarget, tmp_path: Path, clock: FakeClock) -> None:
    """The line holds at, idempotencyKey, target and the message fields."""
    clock.advance(1.5)
    await make_target({"type": "file", "path": "out.jsonl"}, name="log").send(
        message(extra={"attempt": 1}), idempotency_key="01JCALLBACK:log:notify"
    )
    expected = {
        "at": "2026-01-01T00:00:01.500Z",
        "idempotencyKey": "01JCALLBACK:log:notify",
        "target": "log",
        "callbackId": "01JCALLBACK",
        "watcherId": "eth-gas",
        "eventName": "gas_high",
        "priority": "high",
        "message": "Gas is 182 gwei (over 150).",
        "kind": "notify",
        "extra": {"attempt": 1},
    }
    assert [expected] == lines(tmp_path / "out.jsonl")


async def test_appends_after_existing_lines(make_target: MakeTarget, tmp_path: Path) -> None:
    """Existing content is kept; each send adds one line."""
    path = tmp_path / "out.jsonl"
    path.write_text('{"old": true}\n', encoding="utf-8")
    target = make_target({"type": "file", "path": "out.jsonl"})
    await target.send(message(text="a"), idempotency_key="k1")
    await target.send(message(text="b"), idempotency_key="k2")
    assert [None, "a", "b"] == [line.get("message") for line in lines(path)]


async def test_envelope_and_unicode_are_kept(make_target: MakeTarget, tmp_path: Path) -> None:
    """The envelope is written as JSON, non-ASCII text as UTF-8."""
    envelope = {"payload": {"city": "Zürich"}}
    await make_target({"type": "file", "path": "out.jsonl"}).send(
        message(text="café ✓", envelope=envelope), idempotency_key="k"
    )
    [line] = lines(tmp_path / "out.jsonl")
    assert ("café ✓", envelope) == (line["message"], line["envelope"])


async def test_creates_parent_directories(make_target: MakeTarget, tmp_path: Path) -> None:
    """A path under missing directories is created, relative to the config's directory."""
    await make_target({"type": "file", "path": ".sentinel/logs/n.jsonl"}).send(message(), idempotency_key="k")
    assert 1 == len(lines(tmp_path / ".sentinel" / "logs" / "n.jsonl"))


async def test_concurrent_sends_never_interleave(make_target: MakeTarget, tmp_path: Path) -> None:
    """100 concurrent sends → 100 lines, each valid JSON, every key once."""
    target = make_target({"type": "file", "path": "out.jsonl"})
    await asyncio.gather(
        *(target.send(message(text="x" * 5000 + str(i)), idempotency_key=f"k{i}") for i in range(100))
    )
    assert sorted(f"k{i}" for i in range(100)) == sorted(
        line["idempotencyKey"] for line in lines(tmp_path / "out.jsonl")
    )


async def test_unwritable_path_is_retryable(make_target: MakeTarget, tmp_path: Path) -> None:
    """An OSError (the path is a directory) → DeliveryError, retryable, naming the target."""
    (tmp_path / "taken").mkdir()
    with pytest.raises(DeliveryError, match="file target 'log'") as caught:
        await make_target({"type": "file", "path": "taken"}, name="log").send(message(), idempotency_key="k")
    assert caught.value.retryable is True
