"""``bench/relay.py`` runs on a redis-server of its own by default: a short run on Redis delivers
every fallback once, without a Redis URL given and without touching any Redis it did not start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.redis_server import free_port

BENCH = Path(__file__).resolve().parents[2] / "bench" / "relay.py"


@pytest.mark.slow
@pytest.mark.redis
def test_a_short_redis_run_uses_a_server_of_its_own() -> None:
    """200 contracts on ``--store redis``: every fallback arrives once."""
    argv = [sys.executable, str(BENCH), "--quick", "--store", "redis", "--n", "200", "--spread-s", "2"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240, check=False)
    assert 0 == done.returncode, done.stderr[-2000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert ("redis", 200, 0, 0) == (summary["store"], summary["n"], summary["lost"], summary["duplicates"])


def test_a_redis_url_of_database_0_is_refused() -> None:
    """A URL whose database would be flushed must name one other than 0."""
    # refused before any connection: the port is a free one nothing listens on
    argv = [sys.executable, str(BENCH), "--quick", "--store", f"redis://127.0.0.1:{free_port()}/0"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert (2, True) == (done.returncode, "other than 0" in done.stderr)


def test_a_src_without_the_package_is_refused(tmp_path: Path) -> None:
    """``--src`` names the code the service runs: a folder without ``sentinel_hooks`` is refused
    before anything starts."""
    argv = [sys.executable, str(BENCH), "--quick", "--src", str(tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert (2, True) == (done.returncode, "no sentinel_hooks package" in done.stderr)
