"""``bench/storm.py`` runs end to end in a tiny configuration (the bare handler, a real ``sentinel run``
on SQLite, a storm and a steady row) and its last line is JSON: nothing lost, every fire paged
(one page per group once grouping is there), the CPU ratio to the bare handler measured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "storm.py"


@pytest.mark.slow
def test_a_tiny_storm_loses_nothing_and_pages_each_fire_or_group() -> None:
    """30 alerts over 3 alertnames in notifications of 5, then 10 steady alerts, on SQLite."""
    argv = [sys.executable, str(BENCH), "--alerts", "30", "--duration-s", "1", "--alertnames", "3"]
    argv += ["--per", "5", "--wait-ms", "300", "--steady-rate", "20", "--steady-duration-s", "0.5"]
    argv += ["--steady-per", "5", "--stores", "sqlite"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240, check=False)
    assert 0 == done.returncode, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    lines = {(line["mode"], line["store"]): line for line in report["summary"]}
    assert set(lines) == {
        (mode, store) for mode in ("storm", "steady") for store in ("sqlite (bare)", "sqlite")
    }
    storm, steady = lines["storm", "sqlite"], lines["steady", "sqlite"]
    assert (30, 0, 10, 0) == (storm["alerts_sent"], storm["lost"], steady["alerts_sent"], steady["lost"])
    assert storm["pages"] == (3 if storm["grouped"] else storm["fired"])
    assert storm["first_page_ms"] is not None
    assert storm["cpu_ms_per_alert"] > 0
    # 30 alerts cost the bare handler about 1.5 ms, below the 10 ms CPU clock: no ratio then
    assert storm["cpu_ratio_to_bare"] is None or storm["cpu_ratio_to_bare"] > 0
    assert all(not row["errors"] and not row["deliveries_repeated"] for row in report["rows"])
