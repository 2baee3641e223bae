"""The agency the durable tests serve: agent "A" calls `record(note)` once per turn (`guarded(note)`, which waits for
approval, for a message starting with "ask"), then answers "done: <message>".

`record` inserts (call_id, note) into `durable_side_effects` of the test PostgreSQL, so a test can count how often
each call really ran; for a note "block GATE" it then prints `blocked <call_id>` and waits for
`NOTIFY durable_gate, 'GATE'` (the test decides when the tool ends, or kills the worker while it waits).
`agency-swarm serve --factory durable_app:build_agency --durable ...` serves it.
"""

from __future__ import annotations

import asyncio

import asyncpg
from agents import function_tool
from agents.tool_context import ToolContext

from agency_swarm import Agency, Agent, ThreadStore
from agency_swarm.testing import ModelCall, ScriptedModel, Step, ToolCall
from postgres_support import POSTGRES_URL

SIDE_EFFECTS = "CREATE TABLE IF NOT EXISTS durable_side_effects (call_id TEXT NOT NULL, note TEXT NOT NULL)"


@function_tool
async def record(context: ToolContext[object], note: str) -> str:
    """Record a note."""
    connection = await asyncpg.connect(POSTGRES_URL)
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


@function_tool(needs_approval=True)
def guarded(note: str) -> str:
    """Record a note once a person approved it."""
    return f"approved {note}"


def step(call: ModelCall) -> Step:
    if not call.tool_outputs:
        tool = "guarded" if call.last_user_message.startswith("ask") else "record"
        return ToolCall(tool, {"note": call.last_user_message})
    return f"done: {call.last_user_message}"


def build_agency(store: ThreadStore) -> Agency:
    return Agency(Agent(name="A", model=ScriptedModel(step), tools=[record, guarded]), thread_store=store)


async def make_side_effects_table() -> None:
    connection = await asyncpg.connect(POSTGRES_URL)
    try:
        await connection.execute(SIDE_EFFECTS)
    finally:
        await connection.close()
