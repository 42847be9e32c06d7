"""What a Sentinel deployment keeps in Redis: keys and bytes per watcher and per contract.

    python bench/redis_memory.py --redis redis://127.0.0.1:6379/13

Run it after a workload has left its data in the database (bench/scale.py leaves the last run's).
It groups every key under the prefix by kind (the first part of its name), sums ``MEMORY USAGE``
per kind, and divides: watcher kinds (state, lease, lease token, last observation) by the number
of watchers, everything a fire creates (contract, envelope, deliveries, indexes, dedupe key,
session checkpoints, transcript entries) by the number of contracts. Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

import redis

PER_WATCHER = {"lease", "lease-token", "observations", "watcher-states"}
SHARED = {"replicas"}


def kind_of(key: str, prefix: str) -> str:
    return key[len(prefix) :].split(":", 1)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--prefix", default="sentinel:")
    args = parser.parse_args(argv)
    client = redis.Redis.from_url(args.redis, decode_responses=True)
    keys: Counter[str] = Counter()
    size: Counter[str] = Counter()
    for key in client.scan_iter(match=f"{args.prefix}*", count=1000):
        kind = kind_of(key, args.prefix)
        keys[kind] += 1
        size[kind] += int(client.memory_usage(key, samples=0) or 0)
    contracts = keys["contract"]
    watchers = keys["lease-token"] or int(client.hlen(f"{args.prefix}watcher-states"))
    per_watcher = sum(v for k, v in size.items() if k in PER_WATCHER)
    per_fire = sum(v for k, v in size.items() if k not in PER_WATCHER | SHARED)
    info = client.info("memory")
    for kind in sorted(size, key=lambda k: -size[k]):
        print(f"{kind:28} {keys[kind]:>8,} keys {size[kind]:>14,} bytes")
    result = {
        "watchers": watchers,
        "contracts": contracts,
        "keys_per_watcher": round(sum(keys[k] for k in PER_WATCHER) / watchers, 2) if watchers else None,
        "bytes_per_watcher": round(per_watcher / watchers) if watchers else None,
        "keys_per_contract": round(
            sum(v for k, v in keys.items() if k not in PER_WATCHER | SHARED) / contracts, 2
        )
        if contracts
        else None,
        "bytes_per_contract": round(per_fire / contracts) if contracts else None,
        "used_memory": int(info["used_memory"]),
        "used_memory_dataset": int(info.get("used_memory_dataset", 0)),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
