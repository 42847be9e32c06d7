"""bench/startup.py --quick: a real ``sentinel run`` of 1,000 watchers, timed to every watcher polled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_mode_prints_one_json_line_with_every_watcher_polled() -> None:
    """The quick mode ends with one JSON line: sentinel run polled all 1,000 watchers, so did the floor."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "startup.py"), "--quick", "--src", str(ROOT / "src")],
        capture_output=True,
        text=True,
        timeout=180,  # a deadline: the quick run takes about 15 s, several times that on a loaded machine
        env=env,
        check=False,
    )
    assert 0 == done.returncode, done.stderr[-2000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    rows = {(row["code"], row["run"]): row for row in summary["rows"]}
    assert {("after", "cold"), ("bare", "floor")} == set(rows)
    assert all(1_000 == row["polled"] and row["first_s"] <= row["all_s"] for row in rows.values())
