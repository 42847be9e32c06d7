"""The telemetry file's rows (SPEC §2.1) through a running service: a model stand-in runs a
command and notifies, and every row the file gets says what it is and whose it is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from sentinel_hooks.testing import FakeOpenAIServer
from tests.support import Sink, wait_for

HOOK_SECRET = "hs_4Tq8ZmW2pLx9Vb7K"

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
telemetry: {{eventsFile: events.jsonl}}
models:
  agent: {{type: openai, baseUrl: "{model_url}", model: agent-model, timeoutMs: 5000}}
targets:
  hook: {{type: webhook, url: "{sink}", secret: "${{env:HOOK_SECRET}}"}}
actionPolicy:
  default: deny
  rules:
    - {{id: echo-ok, priority: 10, decision: auto, conditions: [{{path: argv0, op: eq, value: echo}}]}}
"""

WATCHER = "id: w\nstrategy: webhook\ndeliveryTargets: [hook]\n"

RUN = {"action": "run_command", "command": "echo", "args": ["checked"]}
NOTIFY = {"action": "notify", "message": f"disk at 97% (key {HOOK_SECRET} leaked by the source)"}


@pytest.fixture
async def rows(tmp_path: Path, sink: Sink, model: FakeOpenAIServer) -> list[dict[str, Any]]:
    """The telemetry rows of one fire whose session ran ``echo`` and notified ``hook``."""
    model.reply_tool_calls([("sentinel_act", RUN), ("sentinel_act", NOTIFY)])
    (tmp_path / "sentinel.yaml").write_text(CONFIG.format(model_url=model.url, sink=sink.url("/in")))
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "w.yaml").write_text(WATCHER)
    service = Service(load_config(tmp_path / "sentinel.yaml", environ={"HOOK_SECRET": HOOK_SECRET}))
    await service.start()
    try:
        outcome = await service.manager.ingest("w", {"disk": 97})
        assert outcome.contract is not None
        callback_id = outcome.contract.callback_id
        await wait_for(lambda: service.sessions.queue.finished.get(callback_id), what="the session")
        await wait_for(lambda: sink.bodies(), what="the notify delivered")
    finally:
        await service.stop()
    text = (tmp_path / "events.jsonl").read_text()
    assert HOOK_SECRET not in text
    found = [json.loads(line) for line in text.splitlines()]
    assert {callback_id} == {row["callbackId"] for row in found if row["kind"] != "evaluation"}
    return found


def of(rows: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [row for row in rows if row["kind"] == kind]


async def test_every_row_says_its_kind_watcher_and_callback(rows: list[dict[str, Any]]) -> None:
    """Each row is {at, kind, watcherId, callbackId, …}, in that order; none uses the old key ``event``."""
    assert [["at", "kind", "watcherId", "callbackId"]] * len(rows) == [list(row)[:4] for row in rows]
    assert [] == [row for row in rows if "event" in row]
    kinds = {
        "evaluation",
        "fire",
        "tool_call",
        "policy_decision",
        "model_call",
        "session",
        "delivery",
        "contract",
    }
    assert kinds == {row["kind"] for row in rows}
    assert {"w"} == {row["watcherId"] for row in rows}


async def test_tool_call_rows_carry_their_arguments_redacted(rows: list[dict[str, Any]]) -> None:
    """The command's argv and the notify's message are in the rows, the secret masked."""
    masked = {**NOTIFY, "message": "disk at 97% (key *** leaked by the source)"}
    assert [("sentinel_act", RUN, "auto"), ("sentinel_act", masked, "ok")] == [
        (row["tool"], row["arguments"], row["decision"]) for row in of(rows, "tool_call")
    ]


async def test_policy_rows_carry_their_watcher(rows: list[dict[str, Any]]) -> None:
    """The run_command's policy decision names the watcher, the tool and the rule that decided."""
    [row] = of(rows, "policy_decision")
    assert ("w", "sentinel_act", "echo-ok", "auto") == (
        row["watcherId"],
        row["tool"],
        row["ruleId"],
        row["decision"],
    )


async def test_delivery_rows_carry_target_kind_attempt_and_outcome(rows: list[dict[str, Any]]) -> None:
    """A delivery's own kind is ``deliveryKind`` (``kind`` says the row is a delivery)."""
    [row] = of(rows, "delivery")
    assert ("hook", "notify", 1, "delivered") == (
        row["target"],
        row["deliveryKind"],
        row["attempt"],
        row["outcome"],
    )
