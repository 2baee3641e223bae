"""Long chats: is a turn's cost independent of the chat's length, on every store?

    .venv/bin/python benchmarks/long_chat.py                      # 10, 1,000 and 10,000 items; every store
    .venv/bin/python benchmarks/long_chat.py --lengths 10 10000 --stores sqlite postgres --rounds 5

Method: per shape, store and length, `--chats` chats are filled with that many stored items in each thread
(written straight to the store: user and assistant messages; in a thread between agents, incoming messages with
their send's call id), then one agency (zero-latency scripted models) runs a turn on each to hold it, then
`--rounds` rounds are timed (perf_counter around each turn), so each chat grows by only a few items per round.
The lengths are measured side by side: each round takes a turn of every chat of every length, in one agency, so a
slow spell of this shared machine (and the heap the long chats make) falls on every length alike. A cell is the
lowest of `--sweeps` median turns, with its ratio to the shortest length.
Shapes, as in compare.py: W1 one agent; W2 a tool call; W3 CEO sends to Developer; W3S the same, streamed; W4 a
chain of five; "approval" a W2 turn whose call pauses for approval and is resumed (both timed), with turn ids.
"changed elsewhere" rows alternate two agencies (two processes would do the same) on each chat, so every turn
first reads what the other one added. "turn ids" rows fill the chats with a turn mark before each user message and
give every timed turn a `turn_id` (as an Idempotency-Key or durable mode does): the model never reads the marks.
PostgreSQL: the test database (AGENCY_SWARM_BENCH_POSTGRES_URL to change).
The last line is what a copy of the history per model call would cost (timed alone): the model is lent the
thread's own list instead, copied only if someone keeps it
(docs/design/performance.md, "A turn's cost does not grow with the chat").
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import agents
from bench_fake_model import Call, FakeModel

from agency_swarm import Agency, Agent, FileThreadStore, MemoryThreadStore, SQLThreadStore, ThreadStore, function_tool

POSTGRES_URL = os.environ.get("AGENCY_SWARM_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
SHAPES = ("W1", "W2", "W3", "W3S", "W4", "approval")
CHAIN = [f"A{number}" for number in range(1, 6)]


def history(length: int, marked: bool = False, sent: bool = False) -> list[dict[str, Any]]:
    """`length` items: user and assistant messages in turn; `marked`, each user message after its turn's mark (as
    turns run with a `turn_id`, an Idempotency-Key or in durable mode store them); `sent`, each user message keeps
    the call id of a send (as in a thread between agents)."""
    items: list[dict[str, Any]] = []
    for number in range(length):
        if number % 2 == 0:
            if marked:
                items.append({"type": "agency_swarm.turn_started", "turn_id": f"filled-{number}"})
            message: dict[str, Any] = {"role": "user", "content": f"message {number}: a short, ordinary message"}
            if sent:
                message["send_call_id"] = f"call_filled_{number}"
            items.append(message)
        else:
            items.append({
                "id": f"msg_{number}", "type": "message", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": f"answer {number}", "annotations": []}],
            })
    return items[:length]


def stores(directory: Path) -> dict[str, Callable[[], ThreadStore]]:
    memory = MemoryThreadStore()  # one instance: "another agency" shares it as another process shares a database
    return {
        "memory": lambda: memory,
        "file": lambda: FileThreadStore(directory / "threads"),
        "sqlite": lambda: SQLThreadStore(f"sqlite:///{directory / 'chats.db'}"),
        "postgres": lambda: SQLThreadStore(POSTGRES_URL),
    }


def send(recipient: str) -> Call:
    return Call("send_message", {"recipient_agent": recipient, "message": "your part", "additional_instructions": None})


@function_tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@function_tool(needs_approval=True)
def deploy(target: str) -> str:
    """Deploy to a target."""
    return f"deployed {target}"


def agency(shape: str, store: ThreadStore) -> Agency:
    if shape == "W1":
        return Agency(Agent(name="Assistant", model=FakeModel("ok")), thread_store=store)
    if shape in ("W2", "approval"):
        tool = add if shape == "W2" else deploy
        call = Call("add", {"a": 1, "b": 2}) if shape == "W2" else Call("deploy", {"target": "prod"})
        return Agency(Agent(name="Assistant", model=FakeModel(call, "done"), tools=[tool]), thread_store=store)
    names = ["CEO", "Developer"] if shape in ("W3", "W3S") else CHAIN
    members = [Agent(name=name, model=FakeModel(send(names[index + 1]), f"{name}: done"))
               for index, name in enumerate(names[:-1])]
    members.append(Agent(name=names[-1], model=FakeModel(f"{names[-1]}: done")))
    flows: list[Any] = [list(pair) for pair in itertools.pairwise(members)]
    return Agency(members[0], *flows, thread_store=store)


def threads(shape: str) -> dict[str, bool]:
    """The threads a shape's chats are filled in: {key: between agents}."""
    if shape in ("W1", "W2", "approval"):
        return {"user->Assistant": False}
    names = ["CEO", "Developer"] if shape in ("W3", "W3S") else CHAIN
    keys = {f"user->{names[0]}": False}
    keys.update({f"{sender}->{recipient}": True for sender, recipient in itertools.pairwise(names)})
    return keys


async def one_turn(each: Agency, shape: str, message: str, chat: str, turn_id: str | None) -> None:
    if shape == "W3S":
        async for _ in each.get_response_stream(message, chat_id=chat, turn_id=turn_id):
            pass
        return
    result = await each.get_response(message, chat_id=chat, turn_id=turn_id)
    if shape == "approval":
        approve = [interruption.call_id for interruption in result.interruptions]
        await each.resume(chat, approve=approve, turn_id=turn_id)


@dataclass
class Case:
    shape: str
    shared: bool = False  # two agencies alternate on each chat ("changed elsewhere")
    marked: bool = False  # turn ids

    @property
    def label(self) -> str:
        return self.shape + (", changed elsewhere" if self.shared else "") + (", turn ids" if self.marked else "")


async def timed_turns(
    case: Case, agencies: list[Agency], chats: dict[int, list[str]], rounds: int
) -> dict[int, list[float]]:
    """Turn times per length; each round takes one turn of every chat of every length in turn, so a slow spell of
    the machine falls on every length alike."""
    def turn_id() -> str | None:
        return uuid.uuid4().hex if case.marked else None

    for names in chats.values():  # hold each chat (loaded once) before timing
        for chat in names:
            for each in agencies:
                await one_turn(each, case.shape, "warm up", chat, turn_id())
    times: dict[int, list[float]] = {length: [] for length in chats}
    for round_number in range(rounds):
        for length, names in chats.items():
            for index, chat in enumerate(names):
                each = agencies[(round_number + index) % len(agencies)]
                start = time.perf_counter()
                await one_turn(each, case.shape, f"round {round_number}", chat, turn_id())
                times[length].append(time.perf_counter() - start)
    return times


async def measure(
    open_store: Callable[[], ThreadStore], case: Case, lengths: list[int], chats: int, rounds: int
) -> dict[int, float]:
    """The median turn per length, the lengths' chats measured side by side in one agency (one heap)."""
    filler = open_store()
    names = {length: [f"long-{length}-{uuid.uuid4().hex[:10]}" for _ in range(chats)] for length in lengths}
    for length in lengths:
        filled = {key: history(length, case.marked and not between, between)
                  for key, between in threads(case.shape).items()}
        for name in names[length]:
            for key, items in filled.items():
                await filler.append(name, key, items)
    if not isinstance(filler, MemoryThreadStore):
        await filler.aclose()
    agencies = [agency(case.shape, open_store()) for _ in range(2 if case.shared else 1)]
    try:
        times = await timed_turns(case, agencies, names, rounds)
    finally:
        for each in agencies:
            for name in [name for group in names.values() for name in group]:
                await each.thread_manager.delete_chat(name)
            if not isinstance(each.thread_manager.store, MemoryThreadStore):
                await each.aclose()
    return {length: statistics.median(found) for length, found in times.items()}


def cases(store: str, shapes: list[str]) -> list[Case]:
    found = [Case(shape) for shape in shapes]
    if "W1" in shapes:
        if store != "file":  # one process per threads directory: nobody else can change its chats
            found.append(Case("W1", shared=True))
        found.append(Case("W1", marked=True))
    if "W3" in shapes and store != "file":
        found.append(Case("W3", shared=True))
    if "approval" in shapes:
        found[shapes.index("approval")] = Case("approval", marked=True)
    return found


def input_copy(length: int) -> float:
    items = history(length)
    started = time.perf_counter()
    for _ in range(1000):
        list(items)
    return (time.perf_counter() - started) / 1000


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[10, 1_000, 10_000])
    parser.add_argument("--stores", nargs="+", default=["memory", "file", "sqlite", "postgres"])
    parser.add_argument("--chats", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--sweeps", type=int, default=3)
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES)
    args = parser.parse_args()
    agents.set_tracing_disabled(True)
    with tempfile.TemporaryDirectory() as directory:
        openers = stores(Path(directory))
        print(f"median turn, ms ({args.chats} chats x {args.rounds} rounds, best of {args.sweeps} sweeps; "
              f"ratio to {args.lengths[0]} items)")
        print(f"| store | {' | '.join(f'{length:,} items' for length in args.lengths)} |")
        print("|---" * (len(args.lengths) + 1) + "|")
        for name in args.stores:
            for case in cases(name, args.shapes):
                best = dict.fromkeys(args.lengths, float("inf"))
                for _ in range(args.sweeps):
                    medians = await measure(openers[name], case, args.lengths, args.chats, args.rounds)
                    best = {length: min(best[length], medians[length]) for length in args.lengths}
                first = best[args.lengths[0]]
                cells = [f"{best[length] * 1000:.3f} ({best[length] / first:.2f}x)" for length in args.lengths]
                print(f"| {name}, {case.label} | {' | '.join(cells)} |", flush=True)
        copies = [f"{input_copy(length) * 1000:.3f}" for length in args.lengths]
        print(f"| a copy of the model's input per call (not made) | {' | '.join(copies)} |")


if __name__ == "__main__":
    asyncio.run(main())
