"""The envelope in the first user message: ``indented_json`` writes what ``json.dumps(indent=1)`` would."""

from __future__ import annotations

import json
import random
from enum import IntEnum
from typing import Any

import pytest

from sentinel_hooks.callbacks.prompt import indented_json


class Level(IntEnum):
    HIGH = 3


def same(value: Any) -> bool:
    return json.dumps(value, ensure_ascii=False, indent=1) == indented_json(value)


def random_json(rng: random.Random, depth: int = 0) -> Any:
    """Plain JSON data of every kind, nested a few levels."""
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.randint(-(10**20), 10**20)
    if kind == 3:
        return rng.uniform(-1e6, 1e6) * 10 ** rng.randint(-30, 30)
    if kind in (4, 5):
        return "".join(rng.choice('aé"\\\n\t\x01/ 💥{}[],:') for _ in range(rng.randrange(12)))
    if kind in (6, 7):
        return {str(random_json(rng, 9)): random_json(rng, depth + 1) for _ in range(rng.randrange(4))}
    return [random_json(rng, depth + 1) for _ in range(rng.randrange(4))]


def test_plain_json_data_is_written_as_json_dumps_writes_it() -> None:
    """Two thousand random documents (escapes, non-ASCII, big ints, floats, empty containers)."""
    rng = random.Random(18)
    documents = [random_json(rng) for _ in range(2000)]
    assert [] == [d for d in documents if not same(d)]


@pytest.mark.parametrize(
    "value",
    [
        {"tuple": (1, 2)},
        {1: "an int key"},
        {"nan": float("nan"), "inf": float("inf")},
        {"level": Level.HIGH},
        {"nested": [{"deep": [1]}, "x"]},
    ],
    ids=["tuple", "int-key", "non-finite", "int-subclass", "plain"],
)
def test_what_is_not_plain_json_is_left_to_json_dumps(value: Any) -> None:
    """Tuples, non-str keys, NaN and subclasses come out as json.dumps writes them."""
    assert same(value)
