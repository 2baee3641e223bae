"""Physical limit and this project alternating in one process: the ratio on a machine whose timings are noisy.

    .venv/bin/python benchmarks/interleaved.py                       # W1,W2,W3,W3S,W4; 9 rounds of 300 turns
    .venv/bin/python benchmarks/interleaved.py --only W2 --rounds 5 --iters 200
    .venv/bin/python benchmarks/interleaved.py --only W3S,W4S                 # W4S: the chain of 5, streamed
    .venv/bin/python benchmarks/interleaved.py --only W2sync,W2sync+hop       # the sync tool's thread hop

Each round times `--iters` turns of the physical limit, then as many of ours, and keeps each side's median turn.
Host preemption and collector pauses land in single turns, not in a round's median, and alternating the two sides
exposes both to the same machine state. The table shows the best round of each side and, in parentheses, the median
round. `compare.py` stays the benchmark of record; this is the figure for a machine where its round means spread.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from typing import Any

import bench_workloads as workloads
from bench_systems import Ours, add_sync

DEFAULT = "W1,W2,W3,W3S,W4"
STREAMED = ("W3S", "W4S")  # W4S (here only): the chain of W4 through the streaming API, every event consumed
# W2sync+hop (here only): W2sync against a physical limit that also runs the tool's function once in a worker thread,
# as the SDK does for a plain `def` tool (`asyncio.to_thread`): the hop is part of the least work such a turn takes
EXTRA = ("W4S", "W2sync+hop")


async def one_workload(system: Ours, workload: str, rounds: int, iters: int, warmup: int) -> dict[str, Any]:
    stream = workload in STREAMED
    shape = {"W4S": "W4", "W2sync+hop": "W2sync"}.get(workload, workload)
    plan = workloads.physical_plan(shape)
    built = workloads.build(system, shape, 10)
    hop = workload == "W2sync+hop"
    await workloads.check(system, built, stream)
    chat = built.chat

    def ours() -> Any:
        return system.stream(chat, workloads.MESSAGE) if stream else system.ask(chat, workloads.MESSAGE)

    async def reset() -> None:
        await system.reset(chat)

    physical: list[float] = []
    measured: list[float] = []
    for _ in range(rounds):
        times = await workloads.timed(lambda: physical_turn(plan, stream, hop), workloads._noop, iters, warmup)
        physical.append(statistics.median(times) * 1e6)
        times = await workloads.timed(ours, reset, iters, warmup)
        measured.append(statistics.median(times) * 1e6)
    return {
        "physical": min(physical), "physical_median": statistics.median(physical),
        "ours": min(measured), "ours_median": statistics.median(measured),
    }


async def physical_turn(plan: list[tuple[Any, Any]], stream: bool, hop: bool) -> int:
    if not hop:
        return await workloads.physical_turn(plan, stream)
    (model, first), (_, second) = plan
    events = await workloads.await_model(model, first, stream)
    await asyncio.to_thread(add_sync, 1, 2)
    return events + await workloads.await_model(model, second, stream)


def row(workload: str, found: dict[str, Any]) -> str:
    ratio = found["ours"] / found["physical"]
    median_ratio = found["ours_median"] / found["physical_median"]
    return (f"| {workload} | {found['physical']:.1f} ({found['physical_median']:.1f}) | "
            f"{found['ours']:.1f} ({found['ours_median']:.1f}) | {ratio:.2f} ({median_ratio:.2f}) |")


async def main(args: argparse.Namespace) -> None:
    system = Ours()
    print("| workload | physical limit, µs/turn | agency_swarm, µs/turn | ratio |")
    print("|---|---:|---:|---:|")
    for workload in args.only.split(","):
        if workload not in (*workloads.TURN_WORKLOADS, *EXTRA):
            choices = ", ".join((*workloads.TURN_WORKLOADS, *EXTRA))
            raise SystemExit(f"unknown workload {workload!r}; choose from {choices}")
        found = await one_workload(system, workload, args.rounds, args.iters, args.warmup)
        print(row(workload, found), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    extra = ", ".join(EXTRA)
    parser.add_argument("--only", default=DEFAULT,
                        help=f"comma list of turn workloads (default {DEFAULT}; W2sync, {extra} too)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=50)
    asyncio.run(main(parser.parse_args()))
