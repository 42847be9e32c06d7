"""Starting many watchers: state and last observation restored in bulk, first polls in phase order."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aiohttp import web

from sentinel_hooks.config.loaded import LoadedWatcher
from sentinel_hooks.config.loader import load_config, load_streamed
from sentinel_hooks.core.paths import MISSING
from sentinel_hooks.service import Service
from tests.service.conftest import SERVICE_CONFIG, Starter
from tests.support import Endpoint, wait_for


def changed_watcher(watcher_id: str, url: str, *, interval_ms: int) -> str:
    return f"""\
id: {watcher_id}
strategy: http-poll
endpoint: "{url}"
intervalMs: {interval_ms}
conditions: [{{path: v, op: changed}}]
deliveryTargets: [console]
"""


def answering(value: dict[str, Any]) -> Any:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.json_response(value)

    return handler


async def test_a_restart_hands_each_runner_its_last_stored_observation(
    start_service: Starter, endpoint: Endpoint, tmp_path: Path
) -> None:
    """After a restart a runner knows its last observation before its first poll (read for all
    watchers at once), so ``changed`` compares the first poll with what was seen before."""
    endpoint.handler = answering({"v": 1})
    first = await start_service(watchers={"a.yaml": changed_watcher("a", endpoint.url(), interval_ms=100)})
    await wait_for(lambda: first.manager.get("a").last_observed == {"v": 1}, what="a first observation")
    await first.stop()
    (tmp_path / "watchers" / "a.yaml").write_text(changed_watcher("a", endpoint.url(), interval_ms=3_600_000))
    (tmp_path / "watchers" / "b.yaml").write_text(changed_watcher("b", endpoint.url(), interval_ms=3_600_000))
    second = Service(load_config(tmp_path / "sentinel.yaml", environ={}))
    await second.start()
    try:
        restored = {w: second.manager.get(w).last_observed for w in ("a", "b")}
        assert {"a": {"v": 1}, "b": MISSING} == restored
    finally:
        await second.stop()


async def test_an_unchanged_value_after_a_restart_fires_nothing_and_a_change_fires(
    start_service: Starter, endpoint: Endpoint, tmp_path: Path
) -> None:
    """The first poll after a restart compares with the observation stored before it."""
    endpoint.handler = answering({"v": 1})
    text = changed_watcher("a", endpoint.url(), interval_ms=100)
    first = await start_service(watchers={"a.yaml": text})
    await wait_for(lambda: first.manager.get("a").last_observed == {"v": 1}, what="a first observation")
    await first.stop()
    seen = endpoint.requests
    second = Service(load_config(tmp_path / "sentinel.yaml", environ={}))
    await second.start()
    try:
        await wait_for(lambda: endpoint.requests >= seen + 2, what="two polls after the restart")
        assert 0 == second.manager.get("a").state.fires
        endpoint.handler = answering({"v": 2})
        await wait_for(lambda: second.manager.get("a").state.fires == 1, what="the fire on a change")
    finally:
        await second.stop()


async def test_a_streamed_start_starts_early_chunks_before_the_last_is_read(
    endpoint: Endpoint, tmp_path: Path
) -> None:
    """`sentinel run` of a project the compiled cache covers (``load_streamed``): the service
    reads the watchers a chunk at a time, soonest to poll first, and starts each chunk before
    reading the next; the watcher polling every 100 ms is running before the last chunk is read,
    and once all are read the config holds every watcher."""
    (tmp_path / "sentinel.yaml").write_text(
        SERVICE_CONFIG.format(
            server="{host: 127.0.0.1, port: 0}", allowed='["127.0.0.1"]', dedupe=0, limits="", extra=""
        )
    )
    (tmp_path / "watchers").mkdir()
    fast = f'id: fast\nstrategy: http-poll\nendpoint: "{endpoint.url()}"\nintervalMs: 100\n'
    (tmp_path / "watchers" / "fast.yaml").write_text(fast)
    line = '  - {{id: s{i}, strategy: http-poll, endpoint: "{url}", intervalMs: 3600000}}\n'
    slow = "".join(line.format(i=i, url=endpoint.url()) for i in range(1_200))
    (tmp_path / "watchers" / "slow.yaml").write_text("watchers:\n" + slow)
    load_config(tmp_path / "sentinel.yaml", environ={}, compiled=True)  # as `sentinel validate`
    config, chunks = load_streamed(tmp_path / "sentinel.yaml", environ={})
    assert chunks is not None
    running_at_read: list[set[str]] = []

    def watched(chunks: Iterator[list[LoadedWatcher]]) -> Iterator[list[LoadedWatcher]]:
        for chunk in chunks:
            running_at_read.append({r.id for r in service.manager.runners() if r.running})
            yield chunk

    service = Service(config, watcher_chunks=watched(chunks))
    await service.start()
    try:
        assert 3 == len(running_at_read)  # fast alone, the slow ones in two
        assert "fast" in running_at_read[-1]
        await wait_for(lambda: endpoint.requests >= 1, what="the fast watcher's first poll")
        assert 1_201 == len(service.config.watchers) == service.watcher_count()
    finally:
        await service.stop()
