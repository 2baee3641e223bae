"""Every operation of the scenario fails, in every way, once per case; after each fault the invariants must hold.

The scenario (faults.harness): CEO sends to Developer and QA in one response; Developer runs `build` and then
`deploy`, which needs approval, so the turn pauses and is resumed with it approved; QA runs `review`; twice (two
turns). Each case makes operation k of that scripted phase fail (a store append or load, a turn lock, a model call)
by raising or by cancelling the turn, before or after the store committed. Then the same process (or a fresh one
on the same store) resumes and takes one more turn, or (continuation "message") sends the new message at once.
A failing sweep prints each broken invariant once per shape, with its smallest case in full: the operations, what
each action did, and the threads stored.
"""

from __future__ import annotations

import logging

import pytest

from faults import harness

SWEEPS = [
    # (store, mode, continuation, scripted turns): every store in both modes, with resume in the same process (which
    # also gets the cancel-twice faults) and in a fresh one (which also gets the kills); a new message instead of
    # resume on memory. PostgreSQL (a round trip per operation) scripts one turn instead of two.
    ("memory", "blocking", "same", 2),
    ("memory", "streamed", "fresh", 2),
    ("memory", "blocking", "message", 2),
    ("file", "streamed", "same", 2),
    ("file", "blocking", "fresh", 2),
    ("sqlite", "blocking", "same", 2),
    ("sqlite", "streamed", "fresh", 2),
    ("postgres", "blocking", "fresh", 1),
    ("postgres", "streamed", "same", 1),
]
COMPLETED: set[str] = set()
"""Sweeps that ran to the end (their faults are in harness.INJECTED whether or not they found violations)."""


def sweep_id(entry: tuple[str, str, str, int]) -> str:
    store, mode, continuation, turns = entry
    return f"{store}-{mode}-{continuation}-{turns}turns"


@pytest.mark.parametrize(
    ("fault_backend", "mode", "continuation", "turns"), SWEEPS, ids=[sweep_id(entry) for entry in SWEEPS],
    indirect=["fault_backend"],
)
async def test_every_fault_keeps_the_invariants(
    fault_backend: harness.Backend, mode: str, continuation: str, turns: int, caplog: pytest.LogCaptureFixture
) -> None:
    backend = fault_backend
    caplog.set_level(logging.CRITICAL, logger="agency_swarm")  # the store's warnings about injected faults: noise
    result = await harness.sweep(backend, mode, continuation, turns)
    COMPLETED.add(sweep_id((backend.name, mode, continuation, turns)))
    clean = result.outcomes[0]
    assert clean.fired is None
    assert not clean.violations, "the fault-free run itself fails:\n" + clean.describe()
    print(f"{backend.name}/{mode}/{continuation}: {result.injected} faults in {len(result.outcomes) - 1} cases")
    # every case made its fault happen (PostgreSQL's parallel appends may finish in another order: a few of its
    # numbered operations may not exist in a run)
    assert result.injected >= 0.9 * (len(result.outcomes) - 1)
    if result.failed or result.stopped:
        pytest.fail(harness.report([result]), pytrace=False)
