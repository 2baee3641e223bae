"""Long chats: is a turn's cost independent of the chat's length, on every store?

    .venv/bin/python benchmarks/long_chat.py                      # 10, 1,000 and 10,000 items; every store
    .venv/bin/python benchmarks/long_chat.py --lengths 10 10000 --stores sqlite postgres --rounds 5

Method: per store and length, `--chats` chats are filled with that many stored items (user and assistant
messages, written straight to the store), then one agency (one agent, a zero-latency scripted model) runs a turn
on each to hold it, then `--rounds` rounds of one turn per chat are timed (perf_counter around `get_response`), so
each chat grows by only 2 items per round. The lengths are measured in turn, `--sweeps` times over (so a slow
spell of this shared machine hits every length alike); a cell is the lowest of its sweeps' median turns, with its
ratio to the shortest length.
"changed elsewhere" rows alternate two agencies (two processes would do the same) on each chat, so every turn
first reads what the other one added. "turn ids" rows fill the chats with a turn mark before each user message and
give every timed turn a `turn_id` (as an Idempotency-Key or durable mode does): the model never reads the marks.
PostgreSQL: the test database (AGENCY_SWARM_BENCH_POSTGRES_URL to change).
The last line is what a copy of the history per model call would cost (timed alone): the model is lent the
thread's own list instead, copied only if someone keeps it
(docs/design/performance.md, "The model is lent its thread's list").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import agents
from bench_fake_model import FakeModel

from agency_swarm import Agency, Agent, FileThreadStore, MemoryThreadStore, SQLThreadStore, ThreadStore

POSTGRES_URL = os.environ.get("AGENCY_SWARM_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
THREAD = "user->Assistant"


def history(length: int, marked: bool = False) -> list[dict[str, Any]]:
    """`length` items: user and assistant messages in turn; `marked`, each user message after its turn's mark (as
    turns run with a `turn_id`, an Idempotency-Key or in durable mode store them)."""
    items: list[dict[str, Any]] = []
    for number in range(length):
        if number % 2 == 0:
            if marked:
                items.append({"type": "agency_swarm.turn_started", "turn_id": f"filled-{number}"})
            items.append({"role": "user", "content": f"message {number}: a short message of ordinary length"})
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


def agency(store: ThreadStore) -> Agency:
    return Agency(Agent(name="Assistant", model=FakeModel("ok")), thread_store=store)


async def timed_turns(agencies: list[Agency], chats: list[str], rounds: int, marked: bool) -> list[float]:
    def turn_id() -> str | None:
        return uuid.uuid4().hex if marked else None

    for chat in chats:  # hold each chat (loaded once) before timing
        for each in agencies:
            await each.get_response("warm up", chat_id=chat, turn_id=turn_id())
    times = []
    for round_number in range(rounds):
        for index, chat in enumerate(chats):
            each = agencies[(round_number + index) % len(agencies)]
            start = time.perf_counter()
            await each.get_response(f"round {round_number}", chat_id=chat, turn_id=turn_id())
            times.append(time.perf_counter() - start)
    return times


async def measure(
    open_store: Callable[[], ThreadStore], length: int, chats: int, rounds: int, shared: bool, marked: bool = False
) -> float:
    filler = open_store()
    names = [f"long-{length}-{uuid.uuid4().hex[:10]}" for _ in range(chats)]
    items = history(length, marked)
    for name in names:
        await filler.append(name, THREAD, items)
    if not isinstance(filler, MemoryThreadStore):
        await filler.aclose()
    agencies = [agency(open_store()) for _ in range(2 if shared else 1)]
    try:
        times = await timed_turns(agencies, names, rounds, marked)
    finally:
        for each in agencies:
            for name in names:
                await each.thread_manager.delete_chat(name)
            if not isinstance(each.thread_manager.store, MemoryThreadStore):
                await each.aclose()
    return statistics.median(times)


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
    args = parser.parse_args()
    agents.set_tracing_disabled(True)
    with tempfile.TemporaryDirectory() as directory:
        openers = stores(Path(directory))
        print(f"median turn, ms ({args.chats} chats x {args.rounds} rounds, best of {args.sweeps} sweeps; "
              f"ratio to {args.lengths[0]} items)")
        print(f"| store | {' | '.join(f'{length:,} items' for length in args.lengths)} |")
        print("|---" * (len(args.lengths) + 1) + "|")
        for name in args.stores:
            for shared, marked in ((False, False), (True, False), (False, True)):
                if shared and name == "file":
                    continue  # one process per threads directory: nobody else can change its chats
                best = dict.fromkeys(args.lengths, float("inf"))
                for _ in range(args.sweeps):
                    for length in args.lengths:
                        median = await measure(openers[name], length, args.chats, args.rounds, shared, marked)
                        best[length] = min(best[length], median)
                first = best[args.lengths[0]]
                cells = [f"{best[length] * 1000:.3f} ({best[length] / first:.2f}x)" for length in args.lengths]
                label = f"{name}, changed elsewhere" if shared else (f"{name}, turn ids" if marked else name)
                print(f"| {label} | {' | '.join(cells)} |", flush=True)
        copies = [f"{input_copy(length) * 1000:.3f}" for length in args.lengths]
        print(f"| a copy of the model's input per call (not made) | {' | '.join(copies)} |")


if __name__ == "__main__":
    asyncio.run(main())
