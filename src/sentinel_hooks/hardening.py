"""Keeping the service's memory out of reach of the commands it runs (SPEC.md §5.4).

``sentinel run`` holds every secret of its configuration in its environment and its memory,
and it runs commands: the agent's ``run_command`` and command watchers. On Linux any process of
the same user may read another's ``/proc/PID/environ`` and ``/proc/PID/mem``, so an allowed
``cat /proc/<service pid>/environ`` would hand the model every secret. Children already get an
environment without them (``callbacks/policy/commands.py``); this protects the parent itself.

``protect_process`` makes the service non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``): the kernel
then refuses those files, and ptrace, to every other process that lacks ``CAP_SYS_PTRACE``. The
flag belongs to the service: a child gets its own when it executes a program, so commands keep
working and cannot read the service. A child running as root would still pass the check with
``CAP_SYS_PTRACE`` (and read ``environ`` with ``CAP_SYS_ADMIN`` or ``CAP_PERFMON``), so the
service also drops those three from its bounding set: nothing it executes can hold them. Run as
any other user (the container image does), that drop is refused and not needed. On other
systems both are no-ops.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import sys

log = logging.getLogger(__name__)

PR_SET_DUMPABLE = 4
PR_CAPBSET_READ = 23
PR_CAPBSET_DROP = 24
# Capabilities that pass the kernel's check on a non-dumpable process (linux/capability.h).
TRACE_CAPABILITIES = {"CAP_SYS_PTRACE": 19, "CAP_SYS_ADMIN": 21, "CAP_PERFMON": 38}


def _prctl(option: int, value: int) -> tuple[int, int]:
    """``prctl(option, value, 0, 0, 0)``: its result and errno."""
    libc = ctypes.CDLL(None, use_errno=True)
    result = int(libc.prctl(ctypes.c_int(option), *(ctypes.c_ulong(v) for v in (value, 0, 0, 0))))
    return result, ctypes.get_errno()


def protect_process() -> bool:
    """Make this process non-dumpable and keep ``TRACE_CAPABILITIES`` from its children (Linux).

    True when the process is now non-dumpable; False on other systems, or when the kernel
    refused (logged: the service still runs, its children's environment still holds no secret).
    """
    if not sys.platform.startswith("linux"):
        return False
    result, error = _prctl(PR_SET_DUMPABLE, 0)
    if result != 0:
        log.warning(
            "could not make the service non-dumpable (%s): commands it runs as the same user "
            "can read its environment in /proc",
            errno.errorcode.get(error, error),
        )
        return False
    for name, number in TRACE_CAPABILITIES.items():
        if _prctl(PR_CAPBSET_READ, number)[0] != 1:  # not in the set, or unknown to this kernel
            continue
        result, error = _prctl(PR_CAPBSET_DROP, number)
        if result != 0 and error != errno.EPERM:  # EPERM: not root, and children get no capability
            log.warning("could not drop %s for commands: %s", name, errno.errorcode.get(error, error))
    return True
