"""``bench/sessions.py --quick`` runs end to end (sink, model server, Sentinel) and its last line is JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "sessions.py"


@pytest.mark.slow
def test_quick_mode_prints_one_json_line_with_nothing_lost() -> None:
    """The quick mode's last line parses, every fire got exactly one message, the agent's."""
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick"], capture_output=True, text=True, timeout=50, check=False
    )
    assert 0 == done.returncode, done.stderr[-2000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    [row] = summary["rows"]
    assert (0, 0, True) == (summary["lost"], summary["duplicates"], row["kept_up"])
