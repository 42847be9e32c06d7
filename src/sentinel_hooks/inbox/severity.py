"""How urgent an inbox item is, from the priority of the fire it is about (SPEC.md §8, §6.2).

An item's ``severity`` (info | warning | critical) follows the priority of its callback (low |
normal | high | critical) as PagerDuty's severity does (SPEC.md §16: critical → critical, normal →
warning, low → info), on the inbox's three levels, where ``high`` is a warning as ``normal`` is. So
an approval, an escalation the agent filed without a severity, or a failed delivery of a
``critical`` watcher is ``critical``, never the ``warning`` of a routine fire.

The messages about an item (its escalation steps, SPEC.md §15) carry a priority again, which the
console and Slack show and a webhook receives: the fire's, raised to what the item's severity
says when that is more (an agent may judge a normal fire critical), never lowered.
"""

from __future__ import annotations

from typing import get_args

from sentinel_hooks.core.envelope import Priority
from sentinel_hooks.store.records import Severity

SEVERITY_OF: dict[str, Severity] = {
    "low": "info",
    "normal": "warning",
    "high": "warning",
    "critical": "critical",
}
"""The severity of an item about a fire of each priority."""
PRIORITY_OF: dict[str, Priority] = {"info": "low", "warning": "normal", "critical": "critical"}
"""The least priority a message about an item of each severity carries."""
_ORDER: tuple[Priority, ...] = get_args(Priority)  # lowest first


def severity_for(priority: str | None) -> Severity:
    """The severity of an item about a fire of ``priority`` (``warning`` when it is not known)."""
    return SEVERITY_OF.get(priority or "", "warning")


def message_priority(severity: str, priority: str | None) -> Priority:
    """The priority of a message about an item of ``severity`` whose fire had ``priority`` (None
    when the item belongs to no callback): the higher of the two."""
    floor = PRIORITY_OF.get(severity, "normal")
    given = next((known for known in _ORDER if known == priority), floor)
    return max(floor, given, key=_ORDER.index)
