"""A durable worker process for the recovery tests: `python durable_worker.py URL EXECUTOR QUEUE [EXPIRE]`.

Serves `durable_app`'s agency with DurableTurns. Lines on stdin: `submit CHAT KEY MESSAGE` submits a turn and prints
`turn <turn_id>`. It prints `ready` once launched; its tool prints `blocked <call_id>` (see durable_app).
"""

from __future__ import annotations

import asyncio
import sys

from agency_swarm import SQLThreadStore
from agency_swarm.durable import DurableTurns
from durable_app import build_agency, make_side_effects_table


async def main(url: str, executor: str, queue: str, expire: float) -> None:
    await make_side_effects_table()
    agency = build_agency(SQLThreadStore(url))
    turns = DurableTurns(
        agency, database_url=url, executor_id=executor, queue_name=queue, heartbeat_seconds=expire / 4,
        expire_after_seconds=expire,
    )
    await turns.launch()
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    try:
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            _, chat, key, message = line.rstrip("\n").split(" ", 3)
            handle = await turns.submit(message, chat_id=chat, key=key)
            print(f"turn {handle.turn_id}", flush=True)
        await asyncio.Event().wait()  # stdin closed: keep working the queue until killed
    finally:
        await turns.aclose()
        await agency.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]) if len(sys.argv) > 4 else 2.0))
