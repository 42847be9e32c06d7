"""What the soak benchmark measures, and the throwaway pieces it measures on.

* ``sqlite_size``: the SQLite file after a checkpoint (``PRAGMA wal_checkpoint(TRUNCATE)`` from a
  connection of its own, so the WAL's pages are in the file and the WAL is empty), the bytes of
  its live pages (page count minus free pages: SQLite reuses freed pages, so the file only
  stops growing while the live bytes can shrink), and its row counts;
* ``redis_size``: ``INFO memory``'s ``used_memory``, ``DBSIZE`` and the contracts listed;
* ``own_redis``: a ``redis-server`` of the benchmark's own on a free port (persistence off), so
  the run never touches a Redis it did not start; ``scratch_redis`` one in a folder of its own,
  both removed at the end (what the intake and relay benchmarks run their Redis rows on);
* ``machine_busy_seconds`` and ``cpu_seconds`` (from ``/proc``), to report how much other work
  shared the machine, next to ``os.getloadavg()``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def sqlite_size(path: Path) -> dict[str, Any]:
    """Sizes and row counts of the SQLite store at ``path`` (checkpointed first)."""
    with contextlib.closing(sqlite3.connect(path, timeout=30, isolation_level=None)) as conn:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        contracts = conn.execute("SELECT count(*) FROM contracts").fetchone()[0]
        entries = conn.execute("SELECT count(*) FROM transcripts").fetchone()[0]
        deliveries = conn.execute("SELECT count(*) FROM deliveries").fetchone()[0]
    wal = path.with_name(path.name + "-wal")
    return {
        "file_bytes": path.stat().st_size,
        "wal_bytes": wal.stat().st_size if wal.exists() else 0,
        "live_bytes": (pages - free) * page_size,
        "checkpoint_busy": bool(busy),
        "contracts": contracts,
        "deliveries": deliveries,
        "transcript_entries": entries,
    }


def redis_size(url: str, prefix: str = "sentinel:") -> dict[str, Any]:
    """Memory and key counts of the benchmark's Redis."""
    with redis.Redis.from_url(url) as client:
        memory = client.info("memory")
        return {
            "used_memory": int(memory["used_memory"]),
            "used_memory_dataset": int(memory.get("used_memory_dataset", 0)),
            "keys": int(client.dbsize()),
            "contracts": int(client.zcard(f"{prefix}contract-index:all")),
        }


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def own_redis(folder: Path) -> Iterator[tuple[str, int, str]]:
    """Start ``redis-server`` on a free port of 127.0.0.1 in ``folder``; yield (URL, pid, version)."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("soak bench: redis-server is not installed (the Redis runs need their own)")
    port = _free_port()
    process = subprocess.Popen(
        [
            *(binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"),
            *("--dir", str(folder), "--logfile", str(folder / "redis.log")),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with redis.Redis.from_url(url, socket_connect_timeout=0.5) as client:
                    version = str(client.info("server")["redis_version"])
                break
            except (redis.RedisError, OSError) as exc:
                if process.poll() is not None or time.monotonic() > deadline:
                    log = folder / "redis.log"
                    raise SystemExit(f"soak bench: redis-server did not start (log: {log})") from exc
                time.sleep(0.05)
        yield url, process.pid, version
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def scratch_redis(prefix: str, db: int = 13) -> Iterator[str]:
    """``own_redis`` in a temporary folder named ``prefix…``; yields the URL of its database
    ``db``. The server is stopped and the folder removed at the end."""
    with tempfile.TemporaryDirectory(prefix=prefix) as folder, own_redis(Path(folder)) as (url, _, _):
        yield f"{url.rsplit('/', 1)[0]}/{db}"


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds ``pid`` has used so far (all its threads)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()  # the name (field 2) may hold spaces
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def machine_busy_seconds() -> float:
    """CPU seconds all cores have been busy since boot (``/proc/stat``, any process)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / _CLOCK_TICKS
