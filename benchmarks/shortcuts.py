"""What each shortcut of the turn's hot path pays: it is switched off and on in one process, rounds alternating.

    .venv/bin/python benchmarks/shortcuts.py                              # every shortcut, W1-W4, 5 rounds
    .venv/bin/python benchmarks/shortcuts.py --only "setup reuse" --workloads W1,W3 --rounds 7

Off means the plain path: the function replaced by its plain form (the same source with the shortcut's branch
taken out, compiled in place) or the borrowed SDK fast path refused. Each round times `--iters` turns with the
shortcut on and as many with it off (the order alternates per round) and keeps each side's median turn; the gain
is (off - on) / off over the best round of each side. A shortcut stays only while it pays >= 3 % on some workload
(docs/design/performance.md, "Architecture and speed"). A variant whose source text is gone fails loudly: update it
with the code.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import statistics
import types
from typing import Any

import bench_workloads as workloads
from bench_systems import Ours

TURN = "agency_swarm._turn."


class Swap:
    """`module.attr` set to `plain` while the shortcut is off."""

    def __init__(self, module: str, attr: str, plain: Any) -> None:
        self.module, self.attr, self.plain = importlib.import_module(module), attr, plain
        self.original = getattr(self.module, attr)

    def off(self) -> None:
        setattr(self.module, self.attr, self.plain)

    def on(self) -> None:
        setattr(self.module, self.attr, self.original)


def without(module_name: str, replacements: list[tuple[str, str]], attr: str, own_globals: bool = True) -> Any:
    """`attr` of the module compiled from its source with `replacements` made. With `own_globals` the copy keeps
    its own module namespace (its classes are new); else it reads the real module's globals."""
    module = importlib.import_module(module_name)
    assert module.__file__ is not None
    with open(module.__file__, encoding="utf-8") as file:
        source = file.read()
    for old, new in replacements:
        assert old in source, f"{module_name} no longer contains {old!r}: update this variant"
        source = source.replace(old, new)
    namespace: dict[str, Any] = {"__name__": module_name, "__package__": module.__package__}
    exec(compile(source, module.__file__, "exec"), namespace)
    function = namespace[attr]
    if own_globals:
        return function
    return types.FunctionType(function.__code__, module.__dict__, function.__name__, function.__defaults__)


def variants() -> dict[str, list[Swap]]:
    from agents import ItemHelpers

    from agency_swarm._base import _sdk
    from agency_swarm._turn import _tracing

    plain_open = _tracing.open_trace

    def open_trace_plainly(entry: str, chat: str) -> Any:
        _sdk.SHORTCUTS = False
        try:
            return plain_open(entry, chat)
        finally:
            _sdk.SHORTCUTS = True

    return {
        "setup reuse (_prepare)": [Swap(TURN + "_loop", "reused_setup", lambda turn, extra: None)],
        "one call in place (_calls)": [Swap(TURN + "_loop", "run_tools", without(TURN + "_calls", [
            ("            if len(calls) == 1:", "            if False:")], "run_tools"))],
        "one item stored without the generic scan (_model_call)": [Swap(TURN + "_model_call", "_USUAL", frozenset())],
        "one item classified without the generic scan (_steps)": [Swap(TURN + "_loop", "next_step", without(
            TURN + "_steps", [("    if len(output) == 1:", "    if False:")], "next_step", own_globals=False))],
        "tool output dict (_tools)": [Swap(TURN + "_calls", "output_item",
                                           lambda call, out: dict(ItemHelpers.tool_call_output_item(call, out)))],
        "direct tool calls (_direct_call)": [Swap(TURN + "_tools", "direct_call", lambda tool: None)],
        "tracing-off read (_tracing, _sdk)": [Swap(TURN + "_entry", "open_trace", open_trace_plainly)],
        "filled ToolContext (_sdk)": [Swap("agency_swarm._base._sdk", "_FILLS_TOOL_CONTEXT", False)],
        "stored_item dicts from fields (_items)": [Swap(TURN + "_model_call", "stored_item",
                                                        lambda item: item.model_dump(exclude_unset=True))],
    }


async def _median_turn(system: Ours, built: workloads.Built, stream: bool, iters: int) -> float:
    chat = built.chat

    def turn() -> Any:
        return system.stream(chat, workloads.MESSAGE) if stream else system.ask(chat, workloads.MESSAGE)

    times = await workloads.timed(turn, lambda: system.reset(chat), iters, 50)
    return statistics.median(times) * 1e6


async def gain(system: Ours, swaps: list[Swap], workload: str, rounds: int, iters: int) -> str:
    stream = workload == "W3S"
    built = workloads.build(system, workload, 10)
    on: list[float] = []
    off: list[float] = []
    for index in range(rounds):
        for shortcut in ((True, False) if index % 2 == 0 else (False, True)):
            for swap in swaps:
                swap.on() if shortcut else swap.off()
            try:
                await workloads.check(system, built, stream)  # the same answer either way
                (on if shortcut else off).append(await _median_turn(system, built, stream, iters))
            finally:
                for swap in swaps:
                    swap.on()
    return f"{workload} {min(on):.1f}/{min(off):.1f} {(min(off) - min(on)) / min(off) * 100:+.1f}%"


async def main(args: argparse.Namespace) -> None:
    system = Ours()
    print("| shortcut | workload on/off µs, gain ... |")
    for name, swaps in variants().items():
        if args.only and not any(part in name for part in args.only.split(",")):
            continue
        row = [await gain(system, swaps, workload, args.rounds, args.iters) for workload in args.workloads.split(",")]
        print(f"| {name} | " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma list of parts of shortcut names")
    parser.add_argument("--workloads", default="W1,W2,W3,W4")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=300)
    asyncio.run(main(parser.parse_args()))
