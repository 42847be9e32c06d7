"""A notify and the fallback never both page people for one fire: the notify makes the
contract ``notifying`` (no fallback is due while it may succeed); after the fallback it is a
follow-up (tests/relay/test_follow_ups.py)."""

from __future__ import annotations

from pathlib import Path

from tests.relay.rig import NOTIFY, kinds, started, toolbox
from tests.support import Sink


async def test_a_notify_in_time_fulfils_and_no_fallback_follows(tmp_path: Path, sink: Sink) -> None:
    """The usual case keeps working: notify before the deadline fulfils; a follow-up on the
    fulfilled contract is not refused, and is its own message with its own key."""
    service = await started(tmp_path, sink, timeout_ms=20_000)
    try:
        box, contract = await toolbox(service)
        first = await box.execute(NOTIFY, history=[])
        second = await box.execute(NOTIFY, history=[])
        assert (True, "fulfilled", True) == (first["ok"], first["contract"], second["ok"])
        assert (1, 2) == (first["notify"], second["notify"])
        assert ["notify", "notify.2"] == kinds(sink)
        assert [] == await service.store.claim_due(contract.deadline)
    finally:
        await service.stop()
