"""A durable worker process for the recovery tests: `python durable_worker.py URL EXECUTOR QUEUE [EXPIRE]`.

Its agency: agent "A" calls `record(note)` once per turn, then answers "done: <message>". `record` inserts
(call_id, note) into `durable_side_effects`; for a note "block GATE" it then prints `blocked <call_id>` and waits
for `NOTIFY durable_gate, 'GATE'`. Lines on stdin: `submit CHAT KEY MESSAGE` submits a turn and prints
`turn <turn_id>`. It prints `ready` once launched.
"""

from __future__ import annotations

import asyncio
import sys

import asyncpg
from agents import function_tool
from agents.tool_context import ToolContext

from agency_swarm import Agency, Agent, SQLThreadStore
from agency_swarm.durable import DurableTurns
from agency_swarm.testing import ModelCall, ScriptedModel, Step, ToolCall

SIDE_EFFECTS = "CREATE TABLE IF NOT EXISTS durable_side_effects (call_id TEXT NOT NULL, note TEXT NOT NULL)"


def build(url: str) -> Agency:
    @function_tool
    async def record(context: ToolContext[object], note: str) -> str:
        """Record a note."""
        connection = await asyncpg.connect(url)
        try:
            await connection.execute("INSERT INTO durable_side_effects VALUES ($1, $2)", context.tool_call_id, note)
            if note.startswith("block "):
                opened = asyncio.Event()
                gate = note.removeprefix("block ")
                await connection.add_listener("durable_gate", lambda *args: args[3] == gate and opened.set())
                print(f"blocked {context.tool_call_id}", flush=True)
                await opened.wait()
        finally:
            await connection.close()
        return f"recorded {note}"

    def step(call: ModelCall) -> Step:
        if not call.tool_outputs:
            return ToolCall("record", {"note": call.last_user_message})
        return f"done: {call.last_user_message}"

    return Agency(Agent(name="A", model=ScriptedModel(step), tools=[record]), thread_store=SQLThreadStore(url))


async def main(url: str, executor: str, queue: str, expire: float) -> None:
    connection = await asyncpg.connect(url)
    await connection.execute(SIDE_EFFECTS)
    await connection.close()
    agency = build(url)
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
