"""bench/cli.py --quick runs, and its last line is the JSON summary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "cli.py"


def test_quick_mode_prints_a_json_summary(tmp_path: Path) -> None:
    """A small quick run (this checkout only) times every command and both load shapes."""
    options = ["--files", "50", "--runs", "1", "--load-sizes", "20", "--before", str(tmp_path / "absent")]
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick", *options, "--no-write"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert ("cli", True) == (summary["bench"], summary["bytecode_cache"])
    assert ["20 watcher files", "20 one-line watchers in one file"] == list(summary["load_config"])
    assert all(set(by_side) == {"after"} for by_side in summary["commands"].values())
