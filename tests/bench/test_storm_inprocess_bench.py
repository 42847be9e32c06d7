"""``bench/storm_inprocess.py`` runs in a tiny configuration and its last line is JSON: CPU per alert
measured, and the alerts that join an open group join it written out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "storm_inprocess.py"


def test_a_tiny_in_process_storm_reports_its_cost_and_its_written_joins() -> None:
    """Six notifications of five alerts over five alertnames: in each of the first five the first
    alert opens its name's group whole and four join it written out; the sixth's five join the
    first's group."""
    argv = [sys.executable, str(BENCH), "--count", "6", "--per", "5"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert 0 == done.returncode, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert (30, 25) == (report["alerts"], report["joined_written"])
    assert report["cpu_us_per_alert"] > 0
    assert report["notification_ms_p99"] >= report["notification_ms_p50"] > 0
