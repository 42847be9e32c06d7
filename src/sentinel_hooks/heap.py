"""The garbage collector around work that builds long-lived objects and little garbage.

Importing the config models, loading a project and starting the service create objects that
live as long as the process, and almost no cyclic garbage (parsing 3,000 watchers leaves about
200 objects of it). With CPython's default thresholds the collector still runs every 700
allocations, and its full collections walk everything loaded so far: with 10,000 watchers that
is half of ``load_config``'s CPU. :func:`collection_paused` turns it off for such a block.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collection_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block; the collector is on again after it if
    it was on before (nested blocks, or a caller that already paused it, are left alone)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
