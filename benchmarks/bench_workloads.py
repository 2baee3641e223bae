"""Workloads W1-W6 and their timing; run by `compare.py` as a fresh worker process per run, in either virtualenv.

    python benchmarks/bench_workloads.py worker --system ours --only W1,W3 --rounds 3 --iters 500 --warmup 50
    python benchmarks/bench_workloads.py w6 --system physical --n 500 --latency 0.02

Prints one line `RESULT <json>`. Systems: physical, ours, runner, upstream (the last only in .venv-upstream).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_systems import TOOL_CALLS, System, load_system, offline_environment

offline_environment()

from bench_fake_model import Call, FakeModel, await_model, inputs_for_steps  # noqa: E402

TURN_WORKLOADS = ("W1", "W2", "W2sync", "W3", "W3S", "W4")
ALL_WORKLOADS = (*TURN_WORKLOADS, "W5", "W6")
MESSAGE = "Please do the task."
SOLO_REPLY = "Hello from the agent."
SUM_REPLY = "The sum is 3."
DEV_REPLY = "Dev: the task is done."
CEO_REPLY = "CEO: the developer finished the task."
CHAIN = 5


@dataclass
class Built:
    chat: Any
    models: list[FakeModel]
    calls: list[int]  # model calls per turn, per model
    expected: str
    tool_calls: int = 0


def build(system: System, workload: str, deltas: int, latency: float = 0.0) -> Built:
    """The agents and chat of one workload, with fresh fake models."""
    def model(*steps: Any) -> FakeModel:
        return system.model(*steps, latency=latency, deltas=deltas)

    if workload == "W1":
        solo = model(SOLO_REPLY)
        return Built(system.build(system.agent("Solo", solo)), [solo], [1], SOLO_REPLY)
    if workload in ("W2", "W2sync"):
        calc = model(Call("add", {"a": 1, "b": 2}), SUM_REPLY)
        agent = system.agent("Calculator", calc, [system.add_tool(sync=workload == "W2sync")])
        return Built(system.build(agent), [calc], [2], SUM_REPLY, tool_calls=1)
    if workload in ("W3", "W3S"):
        ceo_model = model(system.delegate("Dev", "Please implement the task."), CEO_REPLY)
        dev_model = model(DEV_REPLY)
        ceo, dev = system.agent("CEO", ceo_model), system.agent("Dev", dev_model)
        return Built(system.build(ceo, [(ceo, dev)]), [ceo_model, dev_model], [2, 1], CEO_REPLY)
    if workload == "W4":
        names = [f"A{i}" for i in range(1, CHAIN + 1)]
        models = [model(system.delegate(names[i + 1], f"{name}: your part, please."), f"{name}: done.")
                  for i, name in enumerate(names[:-1])]
        models.append(model(f"{names[-1]}: leaf done."))
        chain = [system.agent(name, m) for name, m in zip(names, models, strict=True)]
        chat = system.build(chain[0], list(itertools.pairwise(chain)))
        return Built(chat, models, [2] * (CHAIN - 1) + [1], "A1: done.")
    raise KeyError(workload)


async def check(system: System, built: Built, stream: bool) -> int | None:
    """One untimed turn: right final output, right model calls per model, the tool really ran."""
    before, tools_before = [m.calls for m in built.models], TOOL_CALLS[0]
    events = None
    if stream:
        events, output = await system.stream(built.chat, MESSAGE)
    else:
        output = await system.ask(built.chat, MESSAGE)
    calls = [m.calls - b for m, b in zip(built.models, before, strict=True)]
    tools = TOOL_CALLS[0] - tools_before
    if str(output) != built.expected or calls != built.calls or tools != built.tool_calls:
        raise AssertionError(
            f"{system.label}: check failed: output {output!r} (want {built.expected!r}), model calls {calls} "
            f"(want {built.calls}), tool runs {tools} (want {built.tool_calls})"
        )
    await system.reset(built.chat)
    return events


async def timed(turn: Callable[[], Awaitable[Any]], reset: Callable[[], Awaitable[None]], iters: int,
                warmup: int) -> list[float]:
    """perf_counter around each awaited turn; the reset between turns is outside the timer."""
    for _ in range(warmup):
        await turn()
        await reset()
    gc.collect()
    clock, times = time.perf_counter, []
    for _ in range(iters):
        start = clock()
        await turn()
        times.append(clock() - start)
        await reset()
    return times


async def _noop() -> None:
    return None


def physical_plan(workload: str, latency: float = 0.0, deltas: int = 10) -> list[tuple[FakeModel, list[Any]]]:
    """(model, input) in the order a runner makes the workload's calls, inputs chosen to give the same steps."""
    delegate = Call("send_message", {"recipient_agent": "X", "message": "m", "additional_instructions": None})
    if workload == "W1":
        scripts = [(SOLO_REPLY,)]
    elif workload in ("W2", "W2sync"):
        calc = FakeModel(Call("add", {"a": 1, "b": 2}), SUM_REPLY, latency=latency, deltas=deltas)
        return [(calc, model_input) for model_input in inputs_for_steps(2)]
    else:
        depth = 2 if workload in ("W3", "W3S") else CHAIN
        scripts = [(delegate, CEO_REPLY)] * (depth - 1) + [(DEV_REPLY,)]
    models = [FakeModel(*steps, latency=latency, deltas=deltas) for steps in scripts]
    inputs = [inputs_for_steps(len(steps)) for steps in scripts]
    order = [(i, 0) for i in range(len(scripts))] + [(i, 1) for i in reversed(range(len(scripts) - 1))]
    return [(models[i], inputs[i][k]) for i, k in order]


async def physical_turn(plan: list[tuple[FakeModel, list[Any]]], stream: bool) -> int:
    events = 0
    for model, model_input in plan:
        events += await await_model(model, model_input, stream)
    return events


def _summary(times: list[float], calls: int, events: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {"mean_us": statistics.fmean(times) * 1e6, "median_us": statistics.median(times) * 1e6,
                           "p99_us": sorted(times)[int(0.99 * (len(times) - 1))] * 1e6, "model_calls": calls}
    if events is not None:
        out["events"] = events
    return out


async def turn_workload(system: System | None, workload: str, args: argparse.Namespace) -> dict[str, Any]:
    stream = workload == "W3S"
    if system is None:
        plan = physical_plan(workload, deltas=args.deltas)
        events = await physical_turn(plan, stream)
        times = await timed(lambda: physical_turn(plan, stream), _noop, args.iters, args.warmup)
        return _summary(times, len(plan), events if stream else None)
    built = build(system, workload, args.deltas)
    events = await check(system, built, stream)
    chat = built.chat
    turn = (lambda: system.stream(chat, MESSAGE)) if stream else (lambda: system.ask(chat, MESSAGE))
    before = sum(m.calls for m in built.models)
    times = await timed(turn, lambda: system.reset(chat), args.iters, args.warmup)
    done = sum(m.calls for m in built.models) - before
    if done != (args.iters + args.warmup) * sum(built.calls):
        raise AssertionError(f"{system.label} {workload}: {done} model calls during timing")
    return _summary(times, sum(built.calls), events)


# -- W5: one long chat, persisted -------------------------------------------------------------------------------

def written_bytes() -> int | None:
    """This process's bytes passed to write()-family calls (/proc/self/io wchar); None where unavailable."""
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("wchar:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _scratch_directory() -> Path:
    directory = Path(tempfile.mkdtemp(prefix="bench-w5-"))
    (directory / "store").mkdir()
    return directory


def tree_size(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())


async def w5(system: System | None, turns: int) -> dict[str, Any]:
    window = max(1, min(50, turns // 6))
    directory = _scratch_directory()
    try:
        if system is None:
            plan = physical_plan("W1")
            times = await timed(lambda: physical_turn(plan, False), _noop, turns, 0)
            written = size = None
        else:
            warm = system.build(system.agent("Solo", system.model(SOLO_REPLY)))  # warm the code paths, in memory
            for i in range(5):
                await system.ask(warm, f"warm-up {i}")
            model = system.model(SOLO_REPLY)
            chat = await system.w5_open(system.agent("Solo", model), directory / "store")
            outputs: list[Any] = []
            gc.collect()
            before = written_bytes()
            times = await timed(lambda: _w5_turn(system, chat, outputs), _noop, turns, 0)
            await system.w5_close(chat)
            after = written_bytes()
            if model.calls != turns or any(str(o) != SOLO_REPLY for o in outputs):
                raise AssertionError(f"{system.label} W5: {model.calls} model calls, outputs {set(map(str, outputs))}")
            size = tree_size(directory / "store")
            written = None if before is None or after is None else after - before
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    first, last = statistics.fmean(times[:window]), statistics.fmean(times[-window:])
    return {"turns": turns, "window": window, "total_s": sum(times), "first_ms": first * 1e3, "last_ms": last * 1e3,
            "growth": last / first, "bytes_written": written, "final_bytes": size,
            "written_per_final": written / size if written is not None and size else None}


async def _w5_turn(system: System, chat: Any, outputs: list[Any]) -> None:
    outputs.append(await system.ask(chat, f"Message number {len(outputs)}: an ordinary short message."))


# -- W6: many concurrent W3 chats with a slow model (own process) -----------------------------------------------

def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def w6(system: System | None, n: int, latency: float) -> dict[str, Any]:
    if system is None:
        plan = physical_plan("W3", latency=latency)
        gc.collect()
        rss_before, cpu0, start = _maxrss_mb(), _cpu_s(), time.perf_counter()
        await asyncio.gather(*(physical_turn(plan, False) for _ in range(n)))
        wall, cpu = time.perf_counter() - start, _cpu_s() - cpu0
        if sum(m.calls for m in {id(m): m for m, _ in plan}.values()) != 3 * n:
            raise AssertionError("physical W6: wrong number of model calls")
        return {"n": n, "wall_s": wall, "cpu_s": cpu, "rss_growth_mb": _maxrss_mb() - rss_before, "build_ms": 0.0}
    proto = build(system, "W3", 1, latency)  # stateless models: shared by every chat; agents are per chat
    ceo_model, dev_model = proto.models
    gc.collect()
    rss_before, start = _maxrss_mb(), time.perf_counter()
    chats = []
    for _ in range(n):
        ceo, dev = system.agent("CEO", ceo_model), system.agent("Dev", dev_model)
        chats.append(system.build(ceo, [(ceo, dev)]))
    build_ms = (time.perf_counter() - start) * 1e3 / n
    cpu0, start = _cpu_s(), time.perf_counter()
    outputs = await asyncio.gather(*(system.ask(chat, f"Task {i}.") for i, chat in enumerate(chats)))
    wall, cpu = time.perf_counter() - start, _cpu_s() - cpu0
    wrong = sum(str(o) != CEO_REPLY for o in outputs)
    if wrong or ceo_model.calls != 2 * n or dev_model.calls != n:
        raise AssertionError(f"{system.label} W6: {wrong} wrong outputs, calls {ceo_model.calls}/{dev_model.calls}")
    return {"n": n, "wall_s": wall, "cpu_s": cpu, "rss_growth_mb": _maxrss_mb() - rss_before, "build_ms": build_ms}


# -- entry point ------------------------------------------------------------------------------------------------

async def worker(system: System | None, args: argparse.Namespace) -> dict[str, Any]:
    """rounds x the turn workloads (fresh agents each round), then W5 once."""
    out: dict[str, Any] = {}
    for _ in range(args.rounds):
        for workload in TURN_WORKLOADS:
            if workload in args.only:
                out.setdefault(workload, []).append(await turn_workload(system, workload, args))
    if "W5" in args.only:
        out["W5"] = [await w5(system, args.w5_turns)]
    return out


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("role", choices=["worker", "w6"])
    parser.add_argument("--system", required=True, choices=["physical", "ours", "runner", "upstream"])
    parser.add_argument("--only", default=",".join(ALL_WORKLOADS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iters", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--deltas", type=int, default=10)
    parser.add_argument("--w5-turns", type=int, default=300)
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--latency", type=float, default=0.02)
    args = parser.parse_args(argv)
    args.only = set(args.only.split(","))
    return args


def main() -> None:
    args = parse()
    system = None if args.system == "physical" else load_system(args.system)
    if args.role == "worker":
        result = asyncio.run(worker(system, args))
    else:
        result = asyncio.run(w6(system, args.n, args.latency))
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
