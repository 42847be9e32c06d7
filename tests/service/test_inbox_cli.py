"""`sentinel inbox …` and `sentinel approvals …` as subprocesses against `sentinel run`.

The CLI cannot create items, so the test opens the service's SQLite file itself (WAL lets a
second process write while the service runs) and creates them through the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from sentinel_hooks.clock import SystemClock
from sentinel_hooks.inbox.items import Inbox
from sentinel_hooks.store import InboxItem, InboxKind, open_store
from tests.service.test_process import Running, make_project

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """One `sentinel run` (SQLite store) shared by this module's tests."""
    running = make_project(tmp_path_factory.mktemp("inbox-cli"))
    running.start()
    yield running
    assert running.proc is not None
    running.proc.kill()
    running.proc.wait()


def create(service: Running, kind: InboxKind, reason: str = "price fell fast") -> InboxItem:
    """Create an item in the running service's SQLite file, as the agent would."""

    async def go() -> InboxItem:
        store = open_store("sqlite:///state.db", base_dir=service.config.parent)
        await store.open()
        try:
            inbox = Inbox(store, SystemClock())
            return await inbox.create(
                kind, severity="warning", reason=reason, watcher_id="eth", actor="agent"
            )
        finally:
            await store.close()

    return asyncio.run(go())


def test_inbox_list_shows_items_in_a_table(service: Running) -> None:
    """`inbox list` prints id, kind, status, severity, watcher, age and reason."""
    item = create(service, "escalation", reason="table-row-reason")
    done = service.cli("inbox", "list", "--kind", "escalation")
    row = next(line for line in done.stdout.splitlines() if item.id in line)
    cells = ["escalation", "open", "warning", "eth", "table-row-reason"]
    assert (0, cells) == (done.returncode, [c for c in cells if c in row])


def test_inbox_list_json_is_the_api_body(service: Running) -> None:
    """`inbox list --json --status open` prints the API's {items, nextCursor} body."""
    item = create(service, "delivery_failure")
    body = service.cli_json("inbox", "list", "--status", "open", "--kind", "delivery_failure")
    expected = service.call("GET", "/api/v1/inbox?status=open&kind=delivery_failure&limit=50")[1]
    assert (expected, item.id) == (body, body["items"][0]["id"])


def test_inbox_show_prints_item_detail_and_history(service: Running) -> None:
    """`inbox show` prints the fields, the detail and the history table."""
    item = create(service, "escalation", reason="show-me")
    done = service.cli("inbox", "show", item.id)
    assert (0, True, True, True) == (
        done.returncode,
        "reason: show-me" in done.stdout,
        "detail:" in done.stdout,
        "history" in done.stdout,
    )


def test_inbox_ack_then_resolve_record_the_cli_actor_and_note(service: Running) -> None:
    """ack and resolve move the item; the history names `cli` and `--actor`, with the note."""
    item = create(service, "escalation")
    acked = service.cli("inbox", "ack", item.id)
    resolved = service.cli("inbox", "resolve", item.id, "--note", "fixed it", "--actor", "ana")
    body = service.call("GET", f"/api/v1/inbox/{item.id}")[1]
    history = [(h["actor"], h["to"], h["note"]) for h in body["history"]]
    assert (f"{item.id}: acked", f"{item.id}: resolved") == (acked.stdout.strip(), resolved.stdout.strip())
    assert [("agent", "open", None), ("cli", "acked", None), ("ana", "resolved", "fixed it")] == history


def test_invalid_transition_exits_1_with_the_reason(service: Running) -> None:
    """Resolving a resolved item exits 1 with the 409 message."""
    item = create(service, "escalation")
    assert 200 == service.call("POST", f"/api/v1/inbox/{item.id}/resolve", {})[0]
    done = service.cli("inbox", "resolve", item.id)
    message = f"sentinel: error: 409: item {item.id} is resolved; only open or acked items can be resolved\n"
    assert (1, message) == (done.returncode, done.stderr)


def test_unknown_id_exits_1(service: Running) -> None:
    """`inbox show` of an unknown id exits 1 with the 404 message."""
    done = service.cli("inbox", "show", "no-such-item")
    message = (
        "sentinel: error: 404: inbox item 'no-such-item' not found; `sentinel inbox list` shows the items\n"
    )
    assert (1, message) == (done.returncode, done.stderr)


def test_approvals_list_shows_only_open_approvals(service: Running) -> None:
    """`approvals list --json` lists open approvals and nothing else."""
    waiting = create(service, "approval", reason="run restart-api")
    create(service, "escalation")
    body = service.cli_json("approvals", "list")
    assert (True, {"approval"}, {"open"}) == (
        waiting.id in [i["id"] for i in body["items"]],
        {i["kind"] for i in body["items"]},
        {i["status"] for i in body["items"]},
    )


def test_approvals_approve_and_deny(service: Running) -> None:
    """approve and deny decide approvals; --json prints the {item} body."""
    first = create(service, "approval")
    second = create(service, "approval")
    approved = service.cli("approvals", "approve", first.id)
    denied = service.cli_json("approvals", "deny", second.id, "--note", "not now")
    assert (f"{first.id}: approved", "denied", "not now", "cli") == (
        approved.stdout.strip(),
        denied["item"]["status"],
        denied["item"]["note"],
        denied["item"]["actor"],
    )


def test_deciding_twice_exits_1(service: Running) -> None:
    """Denying an approved approval exits 1."""
    item = create(service, "approval")
    assert 200 == service.call("POST", f"/api/v1/approvals/{item.id}/approve", {})[0]
    done = service.cli("approvals", "deny", item.id)
    message = f"sentinel: error: 409: item {item.id} is approved; only open approvals can be denied\n"
    assert (1, message) == (done.returncode, done.stderr)
