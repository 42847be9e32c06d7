"""Budgets and pricing in sentinel.yaml and watcher files (SPEC §20): strict, with file:line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.errors import ConfigError

WATCHER = """\
id: w
strategy: webhook
fire:
  budget: {perFire: {tokens: 5000}, perDay: {usd: 2}}
"""


def write(tmp_path: Path, config: str, watcher: str = WATCHER) -> Path:
    (tmp_path / "sentinel.yaml").write_text(config)
    (tmp_path / "watchers").mkdir(exist_ok=True)
    (tmp_path / "watchers" / "w.yaml").write_text(watcher)
    return tmp_path / "sentinel.yaml"


def test_defaults_bound_a_fire_at_200000_tokens_and_nothing_else(tmp_path: Path) -> None:
    """No budgets key: perFire 200000 tokens, no dollar or day limit."""
    loaded = load_config(write(tmp_path, "{}\n", "id: w\nstrategy: webhook\n"), environ={})
    budgets = loaded.service.budgets
    assert ((200000, None), (None, None)) == (
        (budgets.per_fire.tokens, budgets.per_fire.usd),
        (budgets.per_day.tokens, budgets.per_day.usd),
    )


def test_pricing_and_budgets_are_read(tmp_path: Path) -> None:
    """A model's pricing, the service's budgets and a watcher's fire.budget as written."""
    config = (
        "models:\n"
        "  claude: {type: anthropic, model: claude-haiku-4-5,\n"
        "           pricing: {inputPerMTok: 1.0, outputPerMTok: 5}}\n"
        "budgets: {perFire: {tokens: 100000, usd: 0.25}, perDay: {tokens: null, usd: 20}}\n"
    )
    loaded = load_config(write(tmp_path, config), environ={})
    pricing = loaded.service.models["claude"].pricing
    assert pricing is not None
    assert (1.0, 5) == (pricing.input_per_m_tok, pricing.output_per_m_tok)
    assert (0.25, 20) == (loaded.service.budgets.per_fire.usd, loaded.service.budgets.per_day.usd)
    budget = loaded.watchers[0].spec.fire.budget
    assert budget is not None
    assert (5000, 2) == (budget.per_fire.tokens, budget.per_day.usd)


@pytest.mark.parametrize(
    ("config", "watcher", "expected"),
    [
        (
            "budgets: {perFire: {tokens: '100'}}\n",
            WATCHER,
            "sentinel.yaml:1: budgets.perFire.tokens: expected a whole number, got the text '100'",
        ),
        (
            "budgets:\n  perDay: {tokens: 0}\n",
            WATCHER,
            "sentinel.yaml:2: budgets.perDay.tokens: ",
        ),
        (
            "budgets: {perWeek: {tokens: 5}}\n",
            WATCHER,
            "sentinel.yaml:1: budgets.perWeek: unknown key 'perWeek'",
        ),
        (
            "models:\n  m: {type: openai, model: x, pricing: {inputPerMTok: -1, outputPerMTok: 1}}\n",
            WATCHER,
            "sentinel.yaml:2: models.m.pricing.inputPerMTok: ",
        ),
        (
            "{}\n",
            WATCHER.replace("usd: 2", "usd: true"),
            "watchers/w.yaml:4: fire.budget.perDay.usd: ",
        ),
    ],
)
def test_bad_values_are_refused_with_file_and_line(
    tmp_path: Path, config: str, watcher: str, expected: str
) -> None:
    """Wrong types, values below the minimum and unknown keys: one error naming file, line and key."""
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, config, watcher), environ={})
    assert expected in str(caught.value)
