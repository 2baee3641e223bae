"""The same fake-model call, timed alone and with other code between calls: why time ratios exceed work ratios.

    .venv/bin/python benchmarks/model_in_context.py                 # 9 rounds of 300 W1 turns per condition
    .venv/bin/python benchmarks/model_in_context.py --rounds 3 --iters 100

The physical limit awaits the fake model back to back, so every call finds the CPU's caches and branch predictors
exactly as the previous call left them. Any code that runs between two calls (a framework's, or code that has
nothing to do with the model) makes the next call itself slower. This script times only the model's
`get_response`, per call, in four conditions, round by round (each round's median call; the table shows the
best round and, in parentheses, the median round):

- alone: the physical limit's W1 loop;
- inside this project's W1 turn;
- after unrelated work: the physical loop with plain-Python work (json.dumps, textwrap.dedent) between calls,
  of about 10 and 20 µs, code that shares nothing with the model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import textwrap
import time
from collections.abc import Awaitable, Callable
from typing import Any

import bench_workloads as workloads
from bench_fake_model import FakeModel
from bench_systems import Ours

_CALLS: list[float] = []


def _timing_model_calls() -> None:
    """Every FakeModel.get_response of this process appends its own duration to _CALLS."""
    plain = FakeModel.get_response

    async def timed(self: FakeModel, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        response = await plain(self, *args, **kwargs)
        _CALLS.append(time.perf_counter() - start)
        return response

    FakeModel.get_response = timed  # type: ignore[method-assign]


def unrelated_work(rounds: int) -> None:
    """Plain Python that touches none of the model's code or objects."""
    for index in range(rounds):
        json.dumps({"a": [index, str(index), {"b": None}]})
        textwrap.dedent("  lorem\n  ipsum")


def _work_cost(rounds: int) -> float:
    """µs one `unrelated_work(rounds)` takes, median of 200."""
    times = []
    for _ in range(200):
        start = time.perf_counter()
        unrelated_work(rounds)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


async def _median_call(turn: Callable[[], Awaitable[Any]], reset: Callable[[], Awaitable[None]], iters: int,
                       warmup: int) -> float:
    """The median model call of `iters` timed turns (one model call each), after `warmup` untimed ones."""
    _CALLS.clear()
    await workloads.timed(turn, reset, iters, warmup)
    return statistics.median(_CALLS[warmup:]) * 1e6


async def measure(rounds: int, iters: int, warmup: int) -> list[tuple[str, float, float]]:
    """(condition, best round, median round) in µs per model call."""
    _timing_model_calls()
    system = Ours()
    built = workloads.build(system, "W1", 10)
    await workloads.check(system, built, False)
    plan = workloads.physical_plan("W1")

    def physical() -> Awaitable[Any]:
        return workloads.physical_turn(plan, False)

    def physical_with(work: int) -> Callable[[], Awaitable[Any]]:
        async def turn() -> Any:
            unrelated_work(work)
            return await workloads.physical_turn(plan, False)
        return turn

    async def ours() -> Any:
        return await system.ask(built.chat, workloads.MESSAGE)

    async def reset() -> None:
        await system.reset(built.chat)

    light = max(1, round(10 / max(_work_cost(1), 0.1)))  # about 10 µs of work
    conditions: list[tuple[str, Callable[[], Awaitable[Any]], Callable[[], Awaitable[None]]]] = [
        ("alone (the physical limit's loop)", physical, workloads._noop),
        ("inside agency_swarm's W1 turn", ours, reset),
        (f"after ~{_work_cost(light):.0f} µs of unrelated Python", physical_with(light), workloads._noop),
        (f"after ~{_work_cost(2 * light):.0f} µs of unrelated Python", physical_with(2 * light), workloads._noop),
    ]
    found: list[list[float]] = [[] for _ in conditions]  # by position: two measured labels may read the same
    for _ in range(rounds):
        for values, (_, turn, after) in zip(found, conditions, strict=True):
            values.append(await _median_call(turn, after, iters, warmup))
    return [(name, min(values), statistics.median(values))
            for (name, _, _), values in zip(conditions, found, strict=True)]


def table(rows: list[tuple[str, float, float]]) -> str:
    lines = ["| the fake model's get_response | µs per call |", "|---|---:|"]
    lines += [f"| {name} | {best:.1f} ({median:.1f}) |" for name, best, median in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=50)
    arguments = parser.parse_args()
    print(table(asyncio.run(measure(arguments.rounds, arguments.iters, arguments.warmup))))
