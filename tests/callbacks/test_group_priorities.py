"""``GroupPriorities``: a group's most urgent priority, each member's contract read once, on a real store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest

from sentinel_hooks.callbacks.sessions.priorities import GroupPriorities
from sentinel_hooks.store.sqlite import SqliteStore
from sentinel_hooks.store.sqlite.worker import IN_MEMORY
from tests.contract import stores as make


class ReadsCounted(SqliteStore):
    """A real in-memory store that lists the ids each ``trigger_priorities`` asked for."""

    asked: list[list[str]]

    async def trigger_priorities(self, callback_ids: Sequence[str]) -> set[str]:
        self.asked.append(list(callback_ids))
        return await super().trigger_priorities(callback_ids)


@pytest.fixture
async def store() -> AsyncIterator[ReadsCounted]:
    opened = ReadsCounted(IN_MEMORY)
    opened.asked = []
    await opened.open()
    yield opened
    await opened.close()


async def member(store: SqliteStore, callback_id: str, priority: str) -> str:
    await store.accept_contract(make.contract(callback_id, priority=priority), make.envelope(callback_id))
    return callback_id


async def test_each_member_is_read_once_and_a_later_one_can_raise_the_priority(store: ReadsCounted) -> None:
    priorities = GroupPriorities()
    members = [await member(store, f"m{n}", "low") for n in range(3)]
    assert "normal" == await priorities.highest(store, "g", "normal", members)
    assert "normal" == await priorities.highest(store, "g", "normal", members)
    members.append(await member(store, "m3", "high"))
    assert "high" == await priorities.highest(store, "g", "normal", members)
    assert [["m0", "m1", "m2"], ["m3"]] == store.asked


async def test_a_critical_group_reads_no_more(store: ReadsCounted) -> None:
    priorities = GroupPriorities()
    members = [await member(store, "m0", "critical")]
    assert "critical" == await priorities.highest(store, "g", "low", members)
    members.append(await member(store, "m1", "low"))
    assert "critical" == await priorities.highest(store, "g", "low", members)
    assert [["m0"]] == store.asked


async def test_a_shorter_list_than_read_is_read_again_whole(store: ReadsCounted) -> None:
    priorities = GroupPriorities()
    members = [await member(store, f"m{n}", "low") for n in range(2)]
    await priorities.highest(store, "g", "low", members)
    assert "low" == await priorities.highest(store, "g", "low", members[:1])
    assert [["m0", "m1"], ["m0"]] == store.asked


async def test_groups_are_kept_apart_and_the_oldest_forgotten_past_the_limit(store: ReadsCounted) -> None:
    priorities = GroupPriorities(limit=2)
    loud = [await member(store, "loud", "critical")]
    calm = [await member(store, "calm", "low")]
    assert "critical" == await priorities.highest(store, "a", "low", loud)
    assert "low" == await priorities.highest(store, "b", "low", calm)
    assert "low" == await priorities.highest(store, "c", "low", calm)
    assert "critical" == await priorities.highest(store, "a", "low", loud)  # forgotten: read again
    assert [["loud"], ["calm"], ["calm"], ["loud"]] == store.asked
