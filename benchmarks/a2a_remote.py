"""What a send to a RemoteAgent on localhost costs over a local send: ms per message, p50 and p99.

The same CEO -> Developer turn (scripted models, no network but the A2A hop) runs N times with a local Developer
and with the Developer agency served over A2A by `agency-swarm serve --a2a` in another process on 127.0.0.1.

    .venv/bin/python benchmarks/a2a_remote.py [--turns 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests" / "support")]

from agents import set_tracing_disabled  # noqa: E402

from agency_swarm import Agency, Agent, MemoryThreadStore  # noqa: E402
from agency_swarm.testing import ModelCall, ScriptedModel, Step, send_message  # noqa: E402

set_tracing_disabled(True)


def ceo(call: ModelCall) -> Step:
    return send_message("Developer", call.last_user_message) if not call.tool_outputs else call.tool_outputs[-1]


async def timed(agency: Agency, turns: int, warmup: int = 5) -> list[float]:
    times = []
    for index in range(warmup + turns):
        started = time.perf_counter()
        await agency.get_response(f"task {index}", chat_id=f"bench-{index % 20}")
        if index >= warmup:
            times.append((time.perf_counter() - started) * 1000)
    return times


def local_agency() -> Agency:
    developer = Agent(name="Developer", model=ScriptedModel(lambda call: f"did {call.last_user_message}"))
    caller = Agent(name="CEO", model=ScriptedModel(ceo))
    return Agency([caller, [caller, developer]], thread_store=MemoryThreadStore())


def remote_agency(url: str) -> Agency:
    from agency_swarm import RemoteAgent

    caller = Agent(name="CEO", model=ScriptedModel(ceo))
    return Agency([caller, [caller, RemoteAgent(name="Developer", url=url)]], thread_store=MemoryThreadStore())


def row(name: str, times: list[float]) -> str:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return f"| {name} | {statistics.median(ordered):.2f} | {p99:.2f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    turns = parser.parse_args().turns
    from serving_support import start_serve

    os.environ.pop("AGENCY_SWARM_TEST_GATE", None)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    server = start_serve(["--factory", "a2a_app:build_remote", "--store", "memory", "--a2a"])
    try:
        local = asyncio.run(timed(local_agency(), turns))
        remote = asyncio.run(timed(remote_agency(server.url), turns))
    finally:
        server.stop()
    print(f"CEO -> Developer turns, {turns} each (ms per turn; one send per turn)\n")
    print("| send | p50 ms | p99 ms |")
    print("|---|---|---|")
    print(row("local Developer", local))
    print(row("RemoteAgent on localhost (A2A, streamed)", remote))
    extra = [r - statistics.median(local) for r in remote]
    print(row("RemoteAgent cost above a local send", extra))


if __name__ == "__main__":
    main()
