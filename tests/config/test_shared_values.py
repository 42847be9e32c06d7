"""Values many watchers hold alike are kept once (``config.shared_values``), and the shared
empties cannot be changed under the watchers that hold them."""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import pytest

from sentinel_hooks.canonical import canonical_json
from sentinel_hooks.config.shared_values import EMPTY_DICT, EMPTY_LIST, NUMBERS_MAX, shared_value
from sentinel_hooks.config.watcher import WATCHER_ADAPTER, AnyWatcher


def _http_poll(i: int) -> AnyWatcher:
    """A watcher read as from a file: its numbers are int objects of its own (``int`` of text),
    not one constant of this module."""
    numbers = {"intervalMs": int("900000"), "timeoutMs": int("5000")}
    data = {"id": f"w{i}", "strategy": "http-poll", "endpoint": f"http://127.0.0.1:9/w/{i}"}
    return WATCHER_ADAPTER.validate_python(data | numbers)


def test_watchers_share_their_empty_lists_dicts_and_numbers() -> None:
    """Two watchers validated apart, and one read back from a pickle (as from the compiled
    cache), hold the same objects for the empties and the ints they have alike."""
    first, second = _http_poll(1), _http_poll(2)
    unpickled = pickle.loads(pickle.dumps(first))
    for spec in (second, unpickled):
        assert spec.headers is first.headers is EMPTY_DICT
        assert spec.tags is first.tags is EMPTY_LIST
        assert spec.interval_ms is first.interval_ms
        assert spec.timeout_ms is first.timeout_ms
    assert unpickled == first


def test_a_watcher_with_shared_values_reads_dumps_and_copies_as_before() -> None:
    """pydantic, json, the canonical form, copies and equality see a list and a dict."""
    spec = _http_poll(3)
    dumped = spec.model_dump(by_alias=True)
    assert ([], {}) == (dumped["tags"], dumped["headers"])
    assert type(dumped["tags"]) is list
    assert type(dumped["headers"]) is dict
    assert '"tags":[]' in spec.model_dump_json(by_alias=True)
    assert "[]" == json.dumps(spec.tags) == canonical_json(spec.tags)
    assert copy.deepcopy(spec).tags is EMPTY_LIST
    assert spec.tags == []
    assert spec.headers == {}
    assert [*spec.tags, "x"] == ["x"]
    assert {**spec.headers, "a": "b"} == {"a": "b"}


@pytest.mark.parametrize(
    "change",
    [
        lambda v: v.append(1),
        lambda v: v.extend([1]),
        lambda v: v.insert(0, 1),
        lambda v: v.__setitem__(slice(0, 0), [1]),
        lambda v: v.__iadd__([1]),
        lambda v: v.__imul__(2),
    ],
)
def test_the_shared_empty_list_refuses_to_change(change: Any) -> None:
    with pytest.raises(TypeError, match="read-only"):
        change(EMPTY_LIST)
    assert [] == EMPTY_LIST


@pytest.mark.parametrize(
    "change",
    [
        lambda v: v.__setitem__("k", 1),
        lambda v: v.update(k=1),
        lambda v: v.setdefault("k", 1),
        lambda v: v.__ior__({"k": 1}),
    ],
)
def test_the_shared_empty_dict_refuses_to_change(change: Any) -> None:
    with pytest.raises(TypeError, match="read-only"):
        change(EMPTY_DICT)
    assert {} == EMPTY_DICT


def test_only_empties_and_ints_are_shared_and_the_numbers_are_bounded() -> None:
    """A list with items, a bool, a float, a string are the values given; past
    ``NUMBERS_MAX`` distinct ints, a new one is kept as given."""
    items = [1]
    assert shared_value(items) is items
    assert shared_value(True) is True
    assert shared_value(1.5) == 1.5
    assert shared_value(10**30 + 1) == 10**30 + 1
    many = [shared_value(10**40 + i) for i in range(NUMBERS_MAX + 10)]
    assert many == [10**40 + i for i in range(NUMBERS_MAX + 10)]
