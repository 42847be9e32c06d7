"""The compiled cache: unchanged watcher files come back as validated; anything else is read."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from sentinel_hooks.config.compiled import CHUNK_ROWS, CompiledCache, cache_file, context_digest
from sentinel_hooks.config.loaded import KEPT_ROWS, KeptData
from sentinel_hooks.config.loader import LoadedConfig, load_config, load_streamed
from sentinel_hooks.errors import ConfigError
from sentinel_hooks.watchers.schedule import start_order

SERVICE = """\
allowedHosts: ["127.0.0.1"]
limits: {minIntervalMs: 1000}
"""
WATCHERS = """\
watchers:
  - {id: a, strategy: http-poll, endpoint: "http://127.0.0.1:9/a", intervalMs: 5000, conditions: []}
  - {id: b, strategy: http-poll, endpoint: "http://127.0.0.1:9/b", intervalMs: 5000, conditions: []}
"""


def project(root: Path, watchers: dict[str, str], service: str = SERVICE) -> Path:
    (root / "watchers").mkdir(exist_ok=True)
    (root / "sentinel.yaml").write_text(service)
    for name, text in watchers.items():
        (root / "watchers" / name).write_text(text)
    return root / "sentinel.yaml"


def kept(config: Path, loaded: LoadedConfig) -> set[str]:
    """The files the cache keeps for this project as loaded."""
    context = context_digest(loaded.service, list(loaded.skills), loaded.base_dir)
    cache = CompiledCache.open(cache_file(config, {}), context)
    cache.close()
    return set(cache.kept)


def test_an_unchanged_project_comes_back_from_the_cache(tmp_path: Path) -> None:
    """The second compiled load gives the watchers, data and places of the first, from the cache."""
    config = project(tmp_path, {"w.yaml": WATCHERS})
    first = load_config(config, environ={}, compiled=True)
    assert {"watchers/w.yaml"} == {
        Path(name).relative_to(tmp_path).as_posix() for name in kept(config, first)
    }
    again = load_config(config, environ={}, compiled=True)
    assert [(w.spec, w.raw, w.source) for w in first.watchers] == [
        (w.spec, w.raw, w.source) for w in again.watchers
    ]
    assert 3 == again.watchers[1].source.line


def test_a_kept_watcher_s_data_is_the_bytes_a_fresh_read_makes(tmp_path: Path) -> None:
    """A reload reads the files afresh and restarts a watcher whose data changed (the bytes of
    ``LoadedWatcher.packed``): a watcher ``sentinel run`` took from the cache must compare equal
    to the same watcher read again, repeated values (which a pickle may share) included."""
    text = WATCHERS + (
        "  - {id: c, strategy: http-poll, endpoint: 'http://127.0.0.1:9/c', intervalMs: 5000,\n"
        "     tags: [status, status], conditions: [{path: status, op: eq, value: status}]}\n"
    )
    config = project(tmp_path, {"w.yaml": text})
    load_config(config, environ={}, compiled=True)
    cached = load_config(config, environ={}, compiled=True)
    fresh = load_config(config, environ={})
    assert [w.packed for w in cached.watchers] == [w.packed for w in fresh.watchers]
    assert ["status", "status"] == cached.watchers[2].raw["tags"]


def test_a_changed_file_is_read_and_its_error_reported_with_its_line(tmp_path: Path) -> None:
    """A file edited after it was kept is read again: its problem stops the load with file:line."""
    config = project(tmp_path, {"w.yaml": WATCHERS})
    load_config(config, environ={}, compiled=True)
    broken = WATCHERS.replace('9/b", intervalMs: 5000', '9/b", intervalMs: 10')
    (tmp_path / "watchers" / "w.yaml").write_text(broken)
    with pytest.raises(ConfigError) as caught:
        load_config(config, environ={}, compiled=True)
    assert [(3, "watchers[1].intervalMs")] == [(issue.line, issue.key) for issue in caught.value.issues]


def test_a_changed_sentinel_yaml_validates_the_kept_files_again(tmp_path: Path) -> None:
    """A file kept under one sentinel.yaml is checked again under another (a raised limit here)."""
    config = project(tmp_path, {"w.yaml": WATCHERS})
    load_config(config, environ={}, compiled=True)
    config.write_text(SERVICE.replace("minIntervalMs: 1000", "minIntervalMs: 6000"))
    with pytest.raises(ConfigError) as caught:
        load_config(config, environ={}, compiled=True)
    assert [2, 3] == [issue.line for issue in caught.value.issues]


def test_files_taking_values_from_the_environment_are_never_kept(tmp_path: Path) -> None:
    """A file with ``${env:…}`` is read on every load: no value of the environment is written to
    disk, and a changed variable is seen."""
    env_file = WATCHERS.replace('"http://127.0.0.1:9/b"', '"http://${env:HOST}:9/b"')
    config = project(tmp_path, {"e.yaml": env_file})
    first = load_config(config, environ={"HOST": "127.0.0.1"}, compiled=True)
    assert set() == kept(config, first)
    assert b"127.0.0.1:9/b" not in cache_file(config, {}).read_bytes()
    with pytest.raises(ConfigError, match="not in allowedHosts"):
        load_config(config, environ={"HOST": "10.0.0.1"}, compiled=True)


def test_a_cache_others_may_write_is_not_read(tmp_path: Path) -> None:
    """A cache file writable by other users is ignored (it is a pickle): the files are read."""
    config = project(tmp_path, {"w.yaml": WATCHERS})
    loaded = load_config(config, environ={}, compiled=True)
    cache_file(config, {}).chmod(0o666)
    assert set() == kept(config, loaded)


def test_a_goal_file_is_looked_for_on_every_load(tmp_path: Path) -> None:
    """A file whose watcher names an operatorGoalFile is not kept: the goal file going away is
    reported on the next load."""
    (tmp_path / "goal.md").write_text("keep it up")
    goal = WATCHERS.replace("conditions: []}", "conditions: [], fire: {operatorGoalFile: goal.md}}")
    config = project(tmp_path, {"g.yaml": goal})
    load_config(config, environ={}, compiled=True)
    (tmp_path / "goal.md").unlink()
    with pytest.raises(ConfigError, match="not found"):
        load_config(config, environ={}, compiled=True)


def test_the_cache_lives_in_the_state_directory_when_one_is_set(tmp_path: Path) -> None:
    """With ``SENTINEL_STATE_DIR`` (a read-only project in a container) the cache is written there."""
    root, state = tmp_path / "project", tmp_path / "state"
    root.mkdir()
    state.mkdir(mode=0o700)
    config = project(root, {"w.yaml": WATCHERS})
    environ = {"SENTINEL_STATE_DIR": str(state)}
    load_config(config, environ=environ, compiled=True)
    assert (state / "watchers.cache").is_file()
    assert not (root / ".sentinel").exists()
    assert cache_file(config, environ) == state / "watchers.cache"


def many(count: int, interval_ms: int, prefix: str = "w") -> str:
    """A watcher file of ``count`` one-line watchers every ``interval_ms``."""
    line = '  - {{id: {p}{i}, strategy: http-poll, endpoint: "http://127.0.0.1:9/{i}", intervalMs: {ms}}}\n'
    return "watchers:\n" + "".join(line.format(p=prefix, i=i, ms=interval_ms) for i in range(count))


def test_a_project_the_cache_covers_is_streamed_soonest_first(tmp_path: Path) -> None:
    """``load_streamed`` of a project kept whole gives no watcher up front and then every one of
    ``load_config``'s, with its data and place, in chunks of one interval each; of the chunks of
    an interval, the first holds the watcher of that interval that polls soonest."""
    config = project(tmp_path, {"a.yaml": many(2_500, 900_000), "b.yaml": many(30, 60_000, "m")})
    whole = load_config(config, environ={}, compiled=True)
    loaded, chunks = load_streamed(config, environ={})
    assert chunks is not None
    assert () == loaded.watchers
    parts = list(chunks)
    assert 4 == len(parts)  # 30 at one minute, 2,500 at 15 minutes in three
    assert all(len({w.spec.interval_ms for w in part}) == 1 for part in parts)
    assert all(len(part) <= CHUNK_ROWS for part in parts)
    streamed = sorted((w.spec.id, w.raw, w.source) for part in parts for w in part)
    assert sorted((w.spec.id, w.raw, w.source) for w in whole.watchers) == streamed
    order = start_order(datetime.now(UTC))
    slow = [part for part in parts if part[0].spec.interval_ms == 900_000]
    assert 3 == len(slow)
    assert min((w for part in slow for w in part), key=lambda w: order(w.spec)) in slow[0]


def test_a_project_the_cache_does_not_cover_is_loaded_whole(tmp_path: Path) -> None:
    """A file added since the cache was written (or changed, or gone) is read: ``load_streamed``
    then loads the project whole, with every check across files, and streams nothing."""
    config = project(tmp_path, {"w.yaml": WATCHERS})
    load_config(config, environ={}, compiled=True)
    (tmp_path / "watchers" / "x.yaml").write_text(WATCHERS)  # the same ids again
    with pytest.raises(ConfigError) as caught:
        load_streamed(config, environ={})
    assert ["id", "id"] == [issue.key for issue in caught.value.issues]
    (tmp_path / "watchers" / "x.yaml").write_text(
        WATCHERS.replace("id: a", "id: c").replace("id: b", "id: d")
    )
    loaded, chunks = load_streamed(config, environ={})
    assert chunks is None
    assert ["a", "b", "c", "d"] == [w.spec.id for w in loaded.watchers]


def test_a_watcher_whose_keys_are_only_reordered_has_the_same_data(tmp_path: Path) -> None:
    """Keys written in another order pickle to other bytes but are the same data: a reload must
    not restart the watcher for it; a changed value is a change."""
    config = project(tmp_path, {"w.yaml": WATCHERS})
    before = load_config(config, environ={}).watchers[0]
    reordered = WATCHERS.replace(
        '{id: a, strategy: http-poll, endpoint: "http://127.0.0.1:9/a", intervalMs: 5000, conditions: []}',
        '{strategy: http-poll, id: a, conditions: [], intervalMs: 5000, endpoint: "http://127.0.0.1:9/a"}',
    )
    (tmp_path / "watchers" / "w.yaml").write_text(reordered)
    after = load_config(config, environ={}).watchers[0]
    assert before.packed != after.packed
    assert before.same_data(after)
    (tmp_path / "watchers" / "w.yaml").write_text(
        reordered.replace("intervalMs: 5000, endpoint", "intervalMs: 6000, endpoint")
    )
    assert not before.same_data(load_config(config, environ={}).watchers[0])


def test_kept_watchers_share_their_data_compressed_and_give_it_back_whole(tmp_path: Path) -> None:
    """Read from the cache, a watcher holds no bytes of its own: its data is in a ``KeptData``
    with up to ``KEPT_ROWS`` others', at a small index. Written again (another file changed),
    every watcher's data still is what a fresh read gives, and compares as the same data."""
    config = project(tmp_path, {"a.yaml": many(600, 900_000), "b.yaml": many(5, 60_000, "m")})
    load_config(config, environ={}, compiled=True)
    first = load_config(config, environ={}, compiled=True).watchers
    assert all(isinstance(w.data, KeptData) and w.at < KEPT_ROWS for w in first)
    assert len({id(w.data) for w in first}) == 1 + 3  # b's five, a's 600 in three
    (tmp_path / "watchers" / "b.yaml").write_text(many(6, 60_000, "m"))
    load_config(config, environ={}, compiled=True)  # a from the cache, b read: all written again
    kept = load_config(config, environ={}, compiled=True).watchers
    fresh = load_config(config, environ={}).watchers
    assert [w.spec.id for w in kept] == [w.spec.id for w in fresh]
    assert all(isinstance(w.data, KeptData) for w in kept)
    assert [w.raw for w in kept] == [w.raw for w in fresh]
    assert all(k.same_data(f) and f.same_data(k) for k, f in zip(kept, fresh, strict=True))
    assert not kept[0].same_data(fresh[1])
