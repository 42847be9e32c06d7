"""CPU time and resident memory of one process, read from /proc (no psutil), and CPU pinning.

``/proc/<pid>/stat`` counts every thread of the process (the SQLite worker thread included),
so a window's CPU is the difference of two readings taken while the process keeps running.
"""

from __future__ import annotations

import os
from pathlib import Path

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds ``pid`` has used so far (all its threads)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    # the command name (field 2) may hold spaces and parentheses: split after the last ')'
    fields = text[text.rindex(")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return (utime + stime) / _CLOCK_TICKS


def machine_busy_seconds() -> float:
    """CPU seconds every core of the machine has spent busy since boot (``/proc/stat``)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / _CLOCK_TICKS


def rss_kib(pid: int) -> int:
    """Resident set size of ``pid`` in KiB (``VmRSS`` of /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS line in /proc/{pid}/status (is it a kernel thread?)")


def pin_to(cpu: int | None) -> None:
    """Run this process (and the threads it starts later) on ``cpu`` only; None leaves it free."""
    if cpu is None or not hasattr(os, "sched_setaffinity"):
        return
    os.sched_setaffinity(0, {cpu})


def cpu_plan() -> tuple[int | None, int | None]:
    """(endpoint CPU, measured-process CPU): two different cores when there are two, else unpinned."""
    if not hasattr(os, "sched_getaffinity"):
        return None, None
    usable = sorted(os.sched_getaffinity(0))
    if len(usable) < 2:
        return None, None
    return usable[0], usable[1]
