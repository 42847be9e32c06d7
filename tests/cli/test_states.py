"""The CLI's list of contract states is the store's (spelled out there to keep the CLI quick)."""

from __future__ import annotations

from typing import get_args

from sentinel_hooks.cli.callbacks import STATES
from sentinel_hooks.store.records import ContractState


def test_cli_states_are_the_contract_states() -> None:
    """`sentinel callbacks list --state` offers every contract state, and nothing else."""
    assert get_args(ContractState) == STATES
