"""The garbage collector around work that builds long-lived objects and little garbage.

Importing the config models, loading a project and starting the service create objects that
live as long as the process, and almost no cyclic garbage (parsing 3,000 watchers leaves about
200 objects of it). With CPython's default thresholds the collector still runs every 700
allocations, and its full collections walk everything loaded so far: with 10,000 watchers that
is half of ``load_config``'s CPU. :func:`collection_paused` turns it off for such a block, and
:func:`freeze_heap` puts what such work left out of the collector's reach once it is done.
A start freezes as it goes (:func:`freeze_loaded` after the load, :func:`freeze_young` after each
slice of watchers), so no single collection walks a million watchers.
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


def freeze_loaded() -> None:
    """Put everything alive now (a loaded project) out of the collector's reach, uncollected.

    Called after ``load_config`` and before the watchers start, so that ``freeze_young`` after
    each slice of a start walks that slice's objects only, not a million watchers' specs.
    Collecting first would walk all of them at once (seconds per 100,000 watchers) to find
    the little cyclic garbage a load leaves (about 200 objects per 3,000 watchers), which then
    stays.
    """
    gc.freeze()


def freeze_young() -> None:
    """Collect the youngest generation, then freeze what survived: run after each slice of a
    start, it keeps every collection during and at the end of the start small.

    Without it, a start with the collector off (``sentinel run``) left every object it made to
    ``freeze_heap``'s one collection at the end: about 2 s of CPU per 100,000 watchers in one
    pause, with polls due meanwhile waiting. What a slice made (its runners, jobs and the
    polls that ran meanwhile) is collected here in a millisecond or so.
    """
    gc.collect(0)
    gc.freeze()


GC_THRESHOLDS = (20_000, 20, 10)  # young, middle, old generation (CPython's defaults: 700, 10, 10)


def freeze_heap() -> None:
    """Collect once, then move every object alive now out of the garbage collector's reach.

    After a start or a reload the heap holds thousands of long-lived objects (watcher specs,
    runners, scheduler jobs, parsed YAML). Left tracked, every full (generation 2) collection
    walks all of them: with 5,000 watchers that was a 50 to 200 ms pause every few seconds, which
    is most of the poll-lag tail. Frozen objects are never scanned; later garbage is collected
    as usual. Objects dropped after a freeze (watchers removed by a reload) are freed by
    reference counting; only cyclic garbage among them stays until the process ends.

    The young generation's threshold is raised too (``GC_THRESHOLDS``). With the default of
    700, a busy loop (1,000 polls a second) ran a young collection every few milliseconds, and
    each moved whatever was in flight at that moment (requests, tasks, futures) into the old
    generation; counted as new long-lived objects, those set off a full collection every few
    seconds, each a 150 ms pause with 10,000 watchers (measured with ``gc.callbacks``). At
    20,000 the in-flight objects mostly die before a collection sees them.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
