"""Rendezvous hashing: stable, balanced, and a join or leave moves only ~1/n of the watchers."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from sentinel_hooks.cluster.rendezvous import owned_by, owner
from tests.cluster.conftest import watcher_ids

REPLICAS = ["host-a-101-0a1b", "host-b-202-2c3d", "host-c-303-4e5f"]
WATCHERS = watcher_ids(300)


def assignment(replicas: list[str]) -> dict[str, str | None]:
    return {w: owner(w, replicas) for w in WATCHERS}


def test_owner_does_not_depend_on_replica_order() -> None:
    """Every replica computes the same owner whatever order it lists the replicas in."""
    assert assignment(REPLICAS) == assignment(list(reversed(REPLICAS)))


def test_no_replicas_means_no_owner() -> None:
    """With nobody live there is no owner."""
    assert None is owner("w000", [])


def test_three_replicas_share_300_watchers_evenly() -> None:
    """3 replicas x 300 watchers: each owns 100 ± 30."""
    counts = Counter(assignment(REPLICAS).values())
    assert set(REPLICAS) == set(counts)
    assert all(70 <= n <= 130 for n in counts.values()), counts


def test_owned_by_matches_owner() -> None:
    """``owned_by`` is the set of watchers whose owner is that replica, and they partition the set."""
    parts = [owned_by(r, WATCHERS, REPLICAS) for r in REPLICAS]
    assert set(WATCHERS) == set().union(*parts)
    assert len(WATCHERS) == sum(len(p) for p in parts)
    assert {w for w, r in assignment(REPLICAS).items() if r == REPLICAS[0]} == parts[0]


def test_a_lone_replica_owns_every_watcher_and_no_other_replica_any() -> None:
    """One live replica: ``owned_by`` gives it all, as ``owner`` does, and a replica not live none."""
    alone = [REPLICAS[0]]
    assert (set(WATCHERS), set()) == (
        owned_by(REPLICAS[0], WATCHERS, alone),
        owned_by(REPLICAS[1], WATCHERS, alone),
    )
    assert {REPLICAS[0]} == set(assignment(alone).values())


def test_join_moves_about_a_quarter_and_only_to_the_new_replica() -> None:
    """A fourth replica takes ~1/4 of the watchers; no watcher moves between the old three."""
    before, after = assignment(REPLICAS), assignment([*REPLICAS, "host-d-404-6a7b"])
    moved = {w: after[w] for w in WATCHERS if before[w] != after[w]}
    assert {"host-d-404-6a7b"} == set(moved.values())
    assert 45 <= len(moved) <= 105, len(moved)


def test_leave_moves_only_the_leavers_watchers() -> None:
    """When a replica leaves, only the watchers it owned move."""
    before, after = assignment(REPLICAS), assignment(REPLICAS[:2])
    moved = {w for w in WATCHERS if before[w] != after[w]}
    assert {w for w in WATCHERS if before[w] == REPLICAS[2]} == moved


def test_rendezvous_is_pure() -> None:
    """The hashing module imports no I/O library (STYLE.md dependency rule)."""
    source = Path(__file__).resolve().parents[2] / "src/sentinel_hooks/cluster/rendezvous.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    imported = {
        (node.module or "") if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert {"__future__", "hashlib", "collections.abc"} == imported
