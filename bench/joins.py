"""CPU per hinted join in-process (issue 30.6): a group's first fire, then N fires offered to the
store as joins only (``GroupRequest.join_only``), timed with ``time.process_time`` (load-honest:
the store's worker thread counts too). No HTTP, no intake: this isolates the store's share of a
storm's per-alert cost, which grows with the group's size if a join rewrites the group.

    python bench/joins.py --joins 2000                       SQLite in a scratch file
    python bench/joins.py --src /tmp/src-main/src            another checkout's code (paired A/B)
    python bench/joins.py --profile                          cProfile's top 25 by own time
The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path


async def measure(joins: int, profile: bool) -> dict[str, float]:
    """CPU ms per join for the first and the last half of ``joins`` into one group."""
    from sentinel_hooks.core.envelope import Envelope
    from sentinel_hooks.store.records import Contract, GroupInfo, GroupRequest, Trigger
    from sentinel_hooks.store.sqlite import SqliteStore

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    key = '["am",["HighCPU"]]'

    def fire(callback_id: str) -> tuple[Contract, Envelope]:
        contract = Contract(
            callback_id=callback_id,
            watcher_id="am",
            dedupe_key=f"dk-{callback_id}",
            session_key="sentinel:hooks:group:am",
            state="pending",
            trigger=Trigger(kind="match", priority="high", matched_at=t0),
            created_at=t0,
            deadline=t0 + timedelta(seconds=40),
            targets=["oncall"],
            group=GroupInfo(key=key, by=[("payload.labels.alertname", "HighCPU")], members=[callback_id]),
        )
        envelope = Envelope.model_validate(
            {
                "callbackId": callback_id,
                "watcher": {"id": "am", "eventName": "alert"},
                "trigger": {"matchedAt": "2026-01-01T00:00:00.000Z", "priority": "high"},
                "payload": {"labels": {"alertname": "HighCPU", "instance": callback_id}},
            }
        )
        return contract, envelope

    with tempfile.TemporaryDirectory() as scratch:
        store = SqliteStore(Path(scratch) / "sentinel.db")
        await store.open()
        first, env = fire("g-0")
        opening = GroupRequest(key=key, interval_ms=60_000, max_fires=10**9)
        await store.accept_contract(first, env, group=opening)
        made = [fire(f"g-{i}") for i in range(1, joins + 1)]
        request = GroupRequest(key=key, interval_ms=60_000, max_fires=10**9, join_only=True)
        profiler = cProfile.Profile() if profile else None
        halves: list[float] = []
        for part in (made[: joins // 2], made[joins // 2 :]):
            if profiler:
                profiler.enable()
            start = time.process_time()
            for contract, envelope in part:
                await store.accept_contract(
                    contract,
                    envelope,
                    group=request,
                    dedupe_key=f"dedupe:{contract.callback_id}",
                    dedupe_ttl_ms=60_000,
                )
            halves.append((time.process_time() - start) * 1000 / len(part))
            if profiler:
                profiler.disable()
        await store.close()
    if profiler:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    return {"joins": joins, "cpu_ms_per_join_first_half": halves[0], "cpu_ms_per_join_last_half": halves[1]}


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--joins", type=int, default=2000)
    parser.add_argument("--src", type=Path, help="import sentinel_hooks from this src directory")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    if args.src is not None:
        sys.path.insert(0, str(args.src))
    print(json.dumps(asyncio.run(measure(args.joins, args.profile))))


if __name__ == "__main__":
    main()
