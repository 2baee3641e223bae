"""W5: 300 sequential turns on one chat with the file store: does a turn get slower as the chat grows, and does
the store write more than it keeps?

    .venv/bin/python benchmarks/w5_file_store.py            # prints the table
    .venv/bin/python benchmarks/w5_file_store.py --turns 30  # quick smoke (CI runs this)

Method: one CEO agent on a zero-latency ScriptedModel, `threads_dir` file store in a temporary directory; each turn
is timed with perf_counter around `await agency.get_response(...)`. Bytes written are this process's write() bytes
from /proc/self/io (wchar) during the run, divided by the store's final size on disk.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import agents
from bench_workloads import written_bytes  # the script's own folder is on sys.path

from agency_swarm import Agency, Agent
from agency_swarm.testing import ScriptedModel


def store_size(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())


async def run(turns: int, directory: Path) -> dict[str, float]:
    agent = Agent(name="CEO", model=ScriptedModel(lambda call: "noted: " + call.last_user_message))
    times: list[float] = []
    async with Agency(agent, threads_dir=directory) as agency:
        before = written_bytes()
        for turn in range(turns):
            start = time.perf_counter()
            await agency.get_response(f"turn {turn}: a short message of ordinary length", chat_id="w5")
            times.append(time.perf_counter() - start)
        after = written_bytes()
    final = store_size(directory)
    window = max(1, min(50, turns // 6))
    first, last = statistics.mean(times[:window]), statistics.mean(times[-window:])
    return {
        "turns": turns,
        "total_s": sum(times),
        "first_ms": first * 1000,
        "last_ms": last * 1000,
        "growth": last / first,
        "written_per_final_byte": float("nan") if before is None or after is None else (after - before) / final,
        "window": window,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    args = parser.parse_args()
    agents.set_tracing_disabled(True)
    with tempfile.TemporaryDirectory() as tmp:
        r = asyncio.run(run(args.turns, Path(tmp) / "threads"))
    w = int(r["window"])
    print(f"| W5 file store, {r['turns']} turns on one chat | value | target |")
    print("|---|---:|---:|")
    print(f"| total | {r['total_s']:.3f} s | |")
    print(f"| mean turn, first {w} | {r['first_ms']:.3f} ms | |")
    print(f"| mean turn, last {w} | {r['last_ms']:.3f} ms | |")
    print(f"| growth, last ÷ first | {r['growth']:.2f}× | ≤ 1.2× |")
    print(f"| bytes written ÷ final size | {r['written_per_final_byte']:.2f}× | ≤ 1.1× |")


if __name__ == "__main__":
    main()
