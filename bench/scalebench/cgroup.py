"""One CPU-capped cgroup per replica, under the cpu controller (cgroup v1 or v2), removed afterwards.

cgroup v1 (``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``): the controller's own hierarchy, e.g.
``/sys/fs/cgroup/cpu``; cgroup v2 (``cpu.max``): the unified hierarchy with ``cpu`` among its
controllers, enabled for the children of the group made here. The groups live under one parent
``sentinel-scale-<pid>``; ``close`` kills what is still in them (only processes this benchmark
started go there) and removes them, whatever ended the run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

PERIOD_US = 100_000


class CgroupError(SystemExit):
    """A cgroup could not be made or used; the message says what to do."""


def cpu_controller() -> tuple[Path, int]:
    """(mount point, cgroup version) of the cpu controller, read from /proc/self/mounts."""
    v2: Path | None = None
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _device, mount, fstype, options, *_ = line.split()
        if fstype == "cgroup" and "cpu" in options.split(","):
            return Path(mount), 1
        if fstype == "cgroup2":
            controllers = Path(mount) / "cgroup.controllers"
            if controllers.exists() and "cpu" in controllers.read_text().split():
                v2 = Path(mount)
    if v2 is not None:
        return v2, 2
    raise CgroupError(
        "scale: --cpu-quota needs the cgroup cpu controller, and none is mounted "
        "(no cgroup v1 'cpu' hierarchy, no cgroup v2 hierarchy offering 'cpu')"
    )


class CpuCgroups:
    """Makes, fills, reads and removes the capped groups of one run."""

    def __init__(self, quota_cores: float) -> None:
        if quota_cores <= 0:
            raise CgroupError(f"scale: --cpu-quota must be above 0 (got {quota_cores:g})")
        self.quota_cores = quota_cores
        self.root, self.version = cpu_controller()
        self.parent = self.root / f"sentinel-scale-{os.getpid()}"
        self.groups: list[Path] = []
        try:
            self.parent.mkdir()
            if self.version == 2:
                self._enable_cpu(self.root)
                self._enable_cpu(self.parent)
        except OSError as exc:
            self.close()
            raise CgroupError(
                f"scale: cannot create a CPU cgroup under {self.root} (cgroup v{self.version}): {exc}. "
                "Run as root or in a container with a writable, delegated cgroup; or leave out --cpu-quota."
            ) from None

    def describe(self) -> str:
        knob = "cpu.cfs_quota_us" if self.version == 1 else "cpu.max"
        return f"cgroup v{self.version} {knob} under {self.root}"

    def make(self, name: str) -> Path:
        """A new group capped at ``quota_cores``; its path."""
        group = self.parent / name
        quota_us = round(self.quota_cores * PERIOD_US)
        try:
            group.mkdir()
            self.groups.append(group)
            if self.version == 1:
                (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (group / "cpu.cfs_quota_us").write_text(str(quota_us))
            else:
                (group / "cpu.max").write_text(f"{quota_us} {PERIOD_US}")
        except OSError as exc:
            raise CgroupError(f"scale: cannot set the CPU quota of {group}: {exc}") from None
        return group

    @staticmethod
    def joiner(group: Path) -> Callable[[], None]:
        """A ``preexec_fn`` that moves the new process into ``group`` before it runs anything."""
        procs = str(group / "cgroup.procs")

        def join() -> None:
            with open(procs, "w") as file:
                file.write(str(os.getpid()))

        return join

    def throttling(self, group: Path) -> dict[str, float]:
        """``cpu.stat`` of ``group``: periods, throttled periods, seconds throttled."""
        lines = (group / "cpu.stat").read_text().splitlines()
        stat = {key: int(value) for key, value in (line.split() for line in lines)}
        throttled_s = stat.get("throttled_time", 0) / 1e9 + stat.get("throttled_usec", 0) / 1e6
        return {
            "periods": stat.get("nr_periods", 0),
            "throttled": stat.get("nr_throttled", 0),
            "throttled_s": throttled_s,
        }

    def close(self) -> None:
        """Kill what is left in the groups (ours), then remove them and the parent."""
        for group in [*self.groups, self.parent]:
            for attempt in range(50):
                if not group.exists():
                    break
                try:
                    pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
                except OSError:
                    pids = []
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                try:
                    group.rmdir()
                    break
                except OSError:
                    if attempt == 49:
                        print(f"scale: could not remove the cgroup {group}; remove it by hand")
                    time.sleep(0.1)

    @staticmethod
    def _enable_cpu(group: Path) -> None:
        control = group / "cgroup.subtree_control"
        if "cpu" not in control.read_text().split():
            control.write_text("+cpu")
