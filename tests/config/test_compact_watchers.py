"""A loaded watcher shares its attribute key table with the others of its strategy
(``keep_compact``): the same fields, a quarter of the bytes (issue 34.5)."""

from __future__ import annotations

import pickle
import sys

import pytest

from sentinel_hooks.config.watcher import KEEPING, WATCHER_ADAPTER, WATCHER_MODELS, AnyWatcher, keep_compact


def _http_poll(i: int) -> AnyWatcher:
    return WATCHER_ADAPTER.validate_python(
        {
            "id": f"w{i}",
            "strategy": "http-poll",
            "endpoint": f"http://127.0.0.1:9/w/{i}",
            "intervalMs": 60000,
            "conditions": [{"path": "status", "op": "eq", "value": "down"}],
        }
    )


def test_watchers_validated_or_read_from_the_cache_keep_their_fields_in_a_shared_table() -> None:
    """Hundreds of watchers validated, then unpickled (as from the compiled cache): each holds
    a dict of its values only, equal field for field."""
    validated = [_http_poll(i) for i in range(300)]
    unpickled = pickle.loads(pickle.dumps(validated))
    assert validated == unpickled
    for spec in [*validated, *unpickled]:
        own_table = sys.getsizeof(dict(spec.__dict__))  # a copy has a key table of its own
        assert sys.getsizeof(spec.__dict__) < 0.6 * own_table


def test_a_compacted_watcher_behaves_as_before() -> None:
    """Reading fields, dumping, comparing and pickling again see no difference."""
    spec = _http_poll(7)
    before = (spec.model_dump(by_alias=True), pickle.dumps(spec), spec.id, spec.endpoint_urls())
    keep_compact(spec)
    assert before == (spec.model_dump(by_alias=True), pickle.dumps(spec), spec.id, spec.endpoint_urls())
    assert spec == _http_poll(7)
    with pytest.raises(Exception, match="frozen"):
        spec.id = "other"  # type: ignore[misc]


@pytest.mark.parametrize("strategy", sorted(WATCHER_MODELS))
def test_every_strategy_has_room_for_its_fields(strategy: str) -> None:
    """The key table of each strategy's model holds every field name from the start."""
    model = WATCHER_MODELS[strategy]
    twin = object.__new__(model)
    for name in model.model_fields:
        object.__setattr__(twin, name, None)
    assert sys.getsizeof(twin.__dict__) < sys.getsizeof(dict(twin.__dict__))


def test_watchers_only_checked_are_left_as_validated() -> None:
    """``sentinel validate`` checks watchers without keeping them: no compacting work there."""
    checking = KEEPING.set(False)
    try:
        checked = _http_poll(1)
    finally:
        KEEPING.reset(checking)
    assert sys.getsizeof(checked.__dict__) == sys.getsizeof(dict(checked.__dict__))
    kept = _http_poll(2)
    assert sys.getsizeof(kept.__dict__) < sys.getsizeof(dict(kept.__dict__))
