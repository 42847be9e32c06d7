"""bench/conditions.py --quick runs, and its last line is the JSON summary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "conditions.py"


def test_quick_mode_prints_a_json_summary() -> None:
    """The quick mode times every case and ends with one JSON line."""
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--batches", "3", "--size", "200"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert ("conditions", {"issue", "nested", "price"}) == (summary["benchmark"], set(summary["cases"]))
    assert all(case["after_us"] > 0 for case in summary["cases"].values())
