"""Where a paced send may go (``PaceStore.take_pace_slot``, SPEC §16), as pure functions of the
slots a key holds: the stores read the slots, ask here, and write the answer in one atomic step
(the Redis store's script spells the same rules in Lua: ``store.redis.pacing``).

A slot is an instant in epoch ms: a send made then, or one reserved for a holder. The rule kept
is that no span of ``window_ms`` holds more than ``limit`` slots, counting each send where it
happened. A holder that comes back after its reserved slot has passed sends at once only when
that keeps the rule (its slot moves to now); otherwise it is given the earliest instant that does.
Moving a late send to where it happens is what keeps the rule honest: counted at its old slot, a
send made later would crowd the window of the slots handed out after it.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence


def fits(ordered: list[int], at_ms: int, limit: int, window_ms: int) -> bool:
    """Whether one more slot at ``at_ms`` keeps every span of ``window_ms`` at ``limit`` or fewer
    slots (``ordered``: the slots, sorted).

    The spans holding ``at_ms`` start in ``[at_ms - window_ms + 1, at_ms]``; a span's count only
    rises where a slot enters it (a start of ``slot - window_ms + 1``), so those starts and the
    first one are the only ones to count."""
    entering = ordered[bisect_left(ordered, at_ms) : bisect_left(ordered, at_ms + window_ms)]
    for start in (at_ms - window_ms + 1, *(s - window_ms + 1 for s in entering)):
        if bisect_left(ordered, start + window_ms) - bisect_left(ordered, start) >= limit:
            return False
    return True


def earliest(slots: Sequence[int], from_ms: int, limit: int, window_ms: int) -> int:
    """The earliest instant at or after ``from_ms`` where one more slot ``fits``: ``from_ms``, or
    the instant a slot leaves the window (``slot + window_ms``); the last slot's always does. A
    holder whose reserved slot has come asks it from now, among the other slots (it keeps its
    place before those who asked after it, as far as the rule allows)."""
    ordered = sorted(slots)
    candidates = sorted({from_ms, *(s + window_ms for s in ordered if s + window_ms > from_ms)})
    return next(at for at in candidates if fits(ordered, at, limit, window_ms))


def new_slot(slots: Sequence[int], at_ms: int, limit: int, window_ms: int) -> int:
    """The slot of a holder asking for the first time: the earliest that fits, after every slot
    handed out so far (slots go in the order asked); ``at_ms`` when it may send now."""
    return earliest(slots, max([at_ms, *slots]), limit, window_ms)
