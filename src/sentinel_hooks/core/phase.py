"""A watcher's phase within its interval: where in each period its polls fall.

Here, below the configuration, so that the compiled cache can keep watchers in the order of
their phases (``config.compiled``) and the scheduler place their polls by the same numbers
(``watchers.schedule``).
"""

from __future__ import annotations

import hashlib

PHASE_STEP_US = 10_000  # 10 ms: see ``watchers.schedule.phase``


def phase_us(watcher_id: str, interval_us: int) -> int:
    """The watcher's offset in microseconds within an interval of ``interval_us``: a hash of its
    id, uniform over the interval's ``PHASE_STEP_US`` steps."""
    digest = hashlib.blake2b(watcher_id.encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") % max(1, interval_us // PHASE_STEP_US)) * PHASE_STEP_US
