"""The response contract under random interleavings of fires, notifies, approvals, deadlines,
delivery faults and restarts, the session's time limit and budgets, two replicas and kill -9, on
SQLite and on Redis (``contract_model.ContractMachine``, ``contract_model_sessions``).

How it finds the old behaviour (docs/relay.md, "How the guarantee is checked"): with the follow-up
hand-over switched off in our code (``HAND_OVER_TRIES = 1`` in relay/relay.py: a notify after the
page is refused) it fails with ``a follow-up (a notify after fulfilled) was refused``; with
``notifying`` taking a second page candidate again it fails with two ``page: true`` messages.
Neither switch is kept: both were run by hand against this test unchanged."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.relay.contract_model import COUNTS, ContractMachine, World

# The CI profile: well under a minute for both stores on a 2-core machine. A longer hunt:
# CONTRACT_MODEL_EXAMPLES=2000 CONTRACT_MODEL_STEPS=60 pytest -n 0 tests/relay/test_contract_model.py
EXAMPLES = int(os.environ.get("CONTRACT_MODEL_EXAMPLES", "100"))
STEPS = int(os.environ.get("CONTRACT_MODEL_STEPS", "30"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    print_blob=True,
)


@pytest.fixture
def redis_db() -> int:
    """The model's own database of the tests' redis-server (``redis_url``; emptied before every
    example too)."""
    return 0


# A notify after the page is a follow-up (SPEC §6.4), never refused: the machine checks it after
# every step (on a relay that refused them, the test below found the refused follow-up).
FOLLOW_UPS = True


def run(kind: str, redis_url: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    """Run the machine on one store; print how much it checked, pass or fail."""
    world = World(kind, redis_url)

    class Machine(ContractMachine):
        follow_ups = FOLLOW_UPS

    Machine.world = world
    try:
        run_state_machine_as_test(Machine, settings=SETTINGS)
    finally:
        world.close()
        report(kind, capsys)


def report(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print(
            f"\ncontract model ({store}): {COUNTS.examples.get(store, 0)} examples, "
            f"{COUNTS.steps.get(store, 0)} steps, final states {COUNTS.outcomes.get(store, {})}"
        )


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_one_message_per_fire_on_sqlite(capsys: pytest.CaptureFixture[str]) -> None:
    """Every fire reaches people exactly once, whatever the interleaving (SQLite store)."""

    run("sqlite", None, capsys)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_one_message_per_fire_on_redis(redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Every fire reaches people exactly once, whatever the interleaving (Redis store)."""

    run("redis", redis_url, capsys)


def test_a_notify_after_the_fallback_is_a_follow_up() -> None:
    """The machine's shortest counterexample on a relay without follow-ups: a fire, its fallback at
    the deadline, then the agent's notify — refused (the machine's random search finds it too)."""
    world = World("sqlite")

    class Machine(ContractMachine):
        follow_ups = True

    Machine.world = world
    try:
        machine = Machine()
        try:
            cid = machine.fire(fallback_a=0, fallback_b=0, mode="concise")
            machine.time_passes(seconds=4.0, relay_first=False)
            machine.notify_rule(cid, ("ok",), ("ok",), ["a", "b"])
            machine.one_message_per_fire()
        finally:
            machine.teardown()
    finally:
        world.close()
