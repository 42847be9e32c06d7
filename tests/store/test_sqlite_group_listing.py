"""SqliteStore's group listing (``store/sqlite/groups.py`` ``list_members``) edits the end of the
group contract's text: what it stores is what dumping the record with the members counted and
appended gives, whatever the group's ``by`` values hold, and a text in another shape is edited by
SQLite's JSON functions instead, to the same record."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sentinel_hooks.store import codec
from sentinel_hooks.store.records import Contract, GroupInfo
from sentinel_hooks.store.sqlite import groups
from tests.contract.stores import contract

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
TRAPS = st.just({"a": 1, "fires": 3, "members": ["x"]}) | st.just(',"fires":1,"members":["y"]}}')
BY = st.lists(st.tuples(st.text(max_size=12), JSON_VALUES | TRAPS), max_size=3)
IDS = st.lists(st.from_regex(r"alert\.[0-9a-f]{8}", fullmatch=True), max_size=5)


def group_contract(by: list[tuple[str, Any]], members: list[str]) -> Contract:
    info = GroupInfo(key='["am",["k"]]', by=by, fires=len(members) + 1, members=["g", *members])
    return contract("g").model_copy(update={"group": info})


def stored_after(doc: str, added: list[str]) -> str:
    """The doc ``list_members`` leaves in a real SQLite table for ``added``."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE contracts (callback_id TEXT PRIMARY KEY, doc TEXT NOT NULL)")
    conn.execute("INSERT INTO contracts VALUES ('g', ?)", (doc,))
    groups.list_members(conn, {"g": added})
    return str(conn.execute("SELECT doc FROM contracts").fetchone()[0])


@settings(max_examples=200, deadline=None)
@given(by=BY, before=IDS, added=IDS.filter(bool))
def test_listing_stores_the_record_with_the_members_appended(
    by: list[tuple[str, Any]], before: list[str], added: list[str]
) -> None:
    """Edited in place, the text is the dumped record counting and listing the new members."""
    doc = codec.dump_record(group_contract(by, before))
    expected = codec.dump_record(group_contract(by, [*before, *added]))
    assert expected == stored_after(doc, added)


def test_a_text_in_another_shape_is_listed_by_sqlite_to_the_same_record() -> None:
    """Keys reordered and spaced (not how Sentinel writes a record): the edit is refused and the
    JSON functions list the members; the record read back is the same."""
    record = group_contract([("payload.labels.alertname", "HighLoad")], ["m1"])
    loaded = json.loads(codec.dump_record(record))
    other = json.dumps(dict(reversed(list(loaded.items()))))
    assert groups._listed(other, ["m2"]) is None
    stored = codec.load_record(Contract, stored_after(other, ["m2", "m3"]))
    assert stored == group_contract([("payload.labels.alertname", "HighLoad")], ["m1", "m2", "m3"])
