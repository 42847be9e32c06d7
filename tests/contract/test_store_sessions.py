"""Store contract: hook session transcripts (seq numbering) and checkpoints."""

from __future__ import annotations

import asyncio

import pytest

from sentinel_hooks.errors import StoreError
from sentinel_hooks.store import Store, TranscriptEntry
from sentinel_hooks.store.base import TranscriptTail
from sentinel_hooks.store.shortcuts import get_checkpoint
from tests.contract import stores

backend, store, make = stores.backend, stores.store, stores.make

SESSION = "sentinel:hooks:watcher:eth-price"


async def test_first_append_numbers_entries_from_one(store: Store, make) -> None:
    """A new session's entries get seq 1, 2, …: the numbers returned, and the entries read back."""
    stored = await store.append_transcript(SESSION, [{"role": "user"}, {"role": "assistant"}], at=make.at(1))
    expected = [
        TranscriptEntry(seq=1, at=make.at(1), entry={"role": "user"}),
        TranscriptEntry(seq=2, at=make.at(1), entry={"role": "assistant"}),
    ]
    assert ([1, 2], expected) == (stored, await store.get_transcript(SESSION))


async def test_later_appends_continue_the_numbering(store: Store, make) -> None:
    """A second append starts after the last seq."""
    await store.append_transcript(SESSION, [{"n": 1}, {"n": 2}], at=make.at(1))
    stored = await store.append_transcript(SESSION, [{"n": 3}], at=make.at(2))
    assert [3] == stored


async def test_sessions_are_numbered_independently(store: Store, make) -> None:
    """Each session key has its own seq counter."""
    await store.append_transcript("s1", [{"n": 1}, {"n": 2}], at=make.at(1))
    stored = await store.append_transcript("s2", [{"n": 1}], at=make.at(1))
    assert [1] == stored


async def test_empty_append_stores_nothing(store: Store, make) -> None:
    """Appending no entries returns [] and leaves the transcript as it was."""
    stored = await store.append_transcript(SESSION, [], at=make.at(1))
    assert ([], []) == (stored, await store.get_transcript(SESSION))


async def test_concurrent_appends_get_unique_contiguous_numbers(store: Store, make) -> None:
    """20 concurrent 3-entry appends number 1…60 with no repeats, each call contiguous."""
    calls = await asyncio.gather(
        *(
            store.append_transcript(SESSION, [{"call": c, "i": i} for i in range(3)], at=make.at(1))
            for c in range(20)
        )
    )
    contiguous = [call == list(range(call[0], call[0] + 3)) for call in calls]
    transcript = await store.get_transcript(SESSION)
    by_seq = {e.seq: e.entry for e in transcript}
    assert (list(range(1, 61)), [True] * 20, [True] * 20) == (
        sorted(seq for call in calls for seq in call),
        contiguous,
        [[by_seq[seq]["call"] for seq in call] == [c] * 3 for c, call in enumerate(calls)],
    )


async def test_get_transcript_after_seq_and_limit(store: Store, make) -> None:
    """after_seq skips entries up to it; limit caps how many come back."""
    await store.append_transcript(SESSION, [{"n": n} for n in range(1, 7)], at=make.at(1))
    window = await store.get_transcript(SESSION, after_seq=2, limit=3)
    assert [3, 4, 5] == [e.seq for e in window]


async def test_unknown_session_has_an_empty_transcript(store: Store) -> None:
    """get_transcript of a session never written is []."""
    assert [] == await store.get_transcript("nope")


async def test_checkpoint_reads_back_equal(store: Store) -> None:
    """A checkpoint put is what is read back."""
    await store.put_checkpoint(SESSION, {"callbackId": "cb-1", "afterSeq": 4})
    assert {"callbackId": "cb-1", "afterSeq": 4} == await get_checkpoint(store, SESSION)


async def test_checkpoint_put_replaces_the_previous_one(store: Store) -> None:
    """A second put replaces, not merges."""
    await store.put_checkpoint(SESSION, {"a": 1})
    await store.put_checkpoint(SESSION, {"b": 2})
    assert {"b": 2} == await get_checkpoint(store, SESSION)


async def test_append_with_checkpoints_puts_them_with_the_entries(store: Store, make) -> None:
    """Checkpoints given to append_transcript are put (replacing earlier ones) with the entries."""
    await store.put_checkpoint("progress", {"status": "old"})
    stored = await store.append_transcript(
        SESSION,
        [{"n": 1}, {"n": 2}],
        at=make.at(1),
        checkpoints={"progress": {"status": "running"}, "memory": {"seen": [1]}},
    )
    assert ([1, 2], {"progress": {"status": "running"}, "memory": {"seen": [1]}}) == (
        stored,
        await store.get_checkpoints(["progress", "memory", "other"]),
    )


async def test_append_of_no_entries_still_puts_the_checkpoints(store: Store, make) -> None:
    """With no entries the checkpoints are put and the transcript is left as it was."""
    await store.append_transcript(SESSION, [{"n": 1}], at=make.at(1))
    stored = await store.append_transcript(SESSION, [], at=make.at(2), checkpoints={"done": {"turns": 2}})
    later = await store.append_transcript(SESSION, [{"n": 2}], at=make.at(3))
    assert ([], {"done": {"turns": 2}}, [2]) == (
        stored,
        await store.get_checkpoints(["done"]),
        later,
    )


async def test_append_refusing_an_entry_puts_no_checkpoint(store: Store, make) -> None:
    """An entry that is not JSON fails the whole step: its checkpoints are not put either."""
    with pytest.raises(StoreError):
        await store.append_transcript(
            SESSION, [{"n": float("nan")}], at=make.at(1), checkpoints={"progress": {"status": "done"}}
        )
    assert ({}, []) == (await store.get_checkpoints(["progress"]), await store.get_transcript(SESSION))


async def test_read_callback_reads_contract_envelope_and_checkpoints(store: Store, make) -> None:
    """read_callback answers what get_contract, get_envelopes and get_checkpoints would."""
    await store.accept_contract(
        make.contract("cb-1"), make.envelope("cb-1"), checkpoints={"message:cb-1": {"text": "hi"}}
    )
    await store.put_checkpoint("memory", {"through": 3})
    view = await store.read_callback("cb-1", ["session:cb-1", "message:cb-1", "memory"])
    assert (
        make.contract("cb-1"),
        make.envelope("cb-1"),
        {"message:cb-1": {"text": "hi"}, "memory": {"through": 3}},
    ) == (view.contract, view.envelope, view.checkpoints)


@pytest.mark.parametrize("with_tail", [False, True], ids=["plain", "tail"])
async def test_read_callback_leaves_the_envelope_out_when_asked(store: Store, make, with_tail: bool) -> None:
    """envelope=False: the contract and checkpoints as always, no envelope (the caller holds it)."""
    await store.accept_contract(
        make.contract("cb-1"), make.envelope("cb-1"), checkpoints={"message:cb-1": {"text": "hi"}}
    )
    tail = TranscriptTail(SESSION, "memory", "through_seq") if with_tail else None
    view = await store.read_callback("cb-1", ["message:cb-1"], tail=tail, envelope=False)
    assert (make.contract("cb-1"), None, {"message:cb-1": {"text": "hi"}}) == (
        view.contract,
        view.envelope,
        view.checkpoints,
    )


async def test_read_callback_of_an_unknown_id(store: Store) -> None:
    """An unknown callback has no contract and no envelope; its checkpoints are still read."""
    await store.put_checkpoint("memory", {"through": 3})
    view = await store.read_callback("nope", ["memory"])
    empty = await store.read_callback("nope", [])
    assert (None, None, {"memory": {"through": 3}}, {}) == (
        view.contract,
        view.envelope,
        view.checkpoints,
        empty.checkpoints,
    )


async def test_read_callback_reads_the_transcript_after_the_checkpoint_s_place(store: Store, make) -> None:
    """With a tail, the entries after the seq the checkpoint holds come back, in order."""
    await store.accept_contract(make.contract("cb-1"), make.envelope("cb-1"))
    await store.append_transcript(SESSION, [{"n": n} for n in range(1, 6)], at=make.at(1))
    await store.put_checkpoint("memory", {"through_seq": 3, "other": "x"})
    tail = TranscriptTail(SESSION, "memory", "through_seq")
    view = await store.read_callback("cb-1", ["memory"], tail=tail)
    assert (
        make.contract("cb-1"),
        [(4, {"n": 4}), (5, {"n": 5})],
        {"memory": {"through_seq": 3, "other": "x"}},
    ) == (
        view.contract,
        [(e.seq, e.entry) for e in view.transcript or []],
        view.checkpoints,
    )


async def test_read_callback_without_a_place_reads_the_whole_transcript(store: Store, make) -> None:
    """No checkpoint, no such member, or no whole number there: every entry, from seq 1."""
    await store.append_transcript(SESSION, [{"n": 1}, {"n": 2}], at=make.at(1))
    await store.put_checkpoint("other", {"x": 1})
    await store.put_checkpoint("text", {"through_seq": "2"})
    await store.put_checkpoint("half", {"through_seq": 1.5})
    seqs = []
    for key in ("none", "other", "text", "half"):
        view = await store.read_callback("cb-1", [], tail=TranscriptTail(SESSION, key, "through_seq"))
        seqs.append([e.seq for e in view.transcript or []])
    assert [[1, 2]] * 4 == seqs


async def test_read_callback_without_a_tail_reads_no_transcript(store: Store, make) -> None:
    """No tail asked for: ``transcript`` is None; a tail of an empty session is []."""
    await store.append_transcript(SESSION, [{"n": 1}], at=make.at(1))
    tail = TranscriptTail("nobody", "memory", "through_seq")
    assert (None, []) == (
        (await store.read_callback("cb-1", ["memory"])).transcript,
        (await store.read_callback("cb-1", ["memory"], tail=tail)).transcript,
    )


def test_a_transcript_tail_needs_a_plain_member_name() -> None:
    """A field that is not a plain name (a path, nothing) is refused."""
    with pytest.raises(ValueError, match="plain member name"):
        TranscriptTail(SESSION, "memory", "a.b")
