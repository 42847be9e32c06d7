"""``bench/intake.py`` runs end to end (sink, a real ``sentinel run``, the bare baseline) and its last
line is JSON: every alert answered 202, fired, and delivered twice, nothing doubled."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "intake.py"


@pytest.mark.slow
def test_a_short_run_accepts_fires_and_delivers_every_alert() -> None:
    """40 alerts in notifications of 5 on SQLite, and the bare handler: two rows, nothing lost."""
    argv = [sys.executable, str(BENCH), "--rates", "20", "--per", "5", "--duration-s", "2"]
    argv += ["--stores", "sqlite"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240, check=False)
    assert 0 == done.returncode, done.stderr[-2000:]
    bare, sentinel = json.loads(done.stdout.strip().splitlines()[-1])
    assert ("bare", "sentinel") == (bare["server"], sentinel["server"])
    assert ({}, {}) == (bare["errors"], sentinel["errors"])
    assert (40, 40) == (sentinel["alerts_sent"], sentinel["fired"])
    assert (0, 0) == (sentinel["deliveries_missing"], sentinel["deliveries_repeated"])
