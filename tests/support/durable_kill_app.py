"""The agency the kill-at-random test serves (`--factory durable_kill_app:build_agency --durable`).

Agent "A" calls `record(note)` once per turn, then answers "done: <message>". `record` is a tool that takes a while,
as one calling a slow API does: it waits a few hundred ms (the workload's latency, not a synchronisation), inserts
(call_id, note) into `durable_kill_effects` of the database named by $DURABLE_KILLS_URL, then waits again. The model
and the tool print to stderr, which the test reads from the server's log (which worker runs which turn, and when):

    kills: model <pid> <executor id> - <message>          at each model call
    kills: start <pid> <executor id> <call id> <note>     as the tool starts, before its first wait
    kills: recorded <pid> <executor id> <call id> <note>  once its row is committed
"""

from __future__ import annotations

import asyncio
import os
import random
import sys

import asyncpg
from agents import function_tool
from agents.tool_context import ToolContext
from dbos import DBOS

from agency_swarm import Agency, Agent, ThreadStore
from agency_swarm.testing import ModelCall, ScriptedModel, Step, ToolCall

URL_ENV = "DURABLE_KILLS_URL"
EFFECTS = "CREATE TABLE IF NOT EXISTS durable_kill_effects (call_id TEXT NOT NULL, note TEXT NOT NULL)"
LATENCY_S = (0.1, 0.4)
"""Each of the tool's two waits lasts a random time in this range."""


_pools: list[asyncpg.Pool] = []


async def _pool() -> asyncpg.Pool:
    """The worker's few connections for the tool's inserts (PostgreSQL's connections are the test's scarcest thing:
    3 workers' DBOS pools and stores take most of the server's 100)."""
    if not _pools:
        pool = await asyncpg.create_pool(os.environ[URL_ENV], min_size=1, max_size=2)
        if _pools:  # another call made one meanwhile
            await pool.close()
        else:
            _pools.append(pool)
    return _pools[0]


def _say(what: str, call_id: str, note: str) -> None:
    print(f"kills: {what} {os.getpid()} {DBOS.executor_id} {call_id} {note}", file=sys.stderr, flush=True)


@function_tool
async def record(context: ToolContext[object], note: str) -> str:
    """Record a note."""
    _say("start", context.tool_call_id, note)
    await asyncio.sleep(random.uniform(*LATENCY_S))  # the slow API's latency: the workload, not a synchronisation
    pool = await _pool()
    await pool.execute("INSERT INTO durable_kill_effects VALUES ($1, $2)", context.tool_call_id, note)
    _say("recorded", context.tool_call_id, note)
    await asyncio.sleep(random.uniform(*LATENCY_S))
    return f"recorded {note}"


def step(call: ModelCall) -> Step:
    _say("model", "-", call.last_user_message)
    if not call.tool_outputs:
        return ToolCall("record", {"note": call.last_user_message})
    return f"done: {call.last_user_message}"


def build_agency(store: ThreadStore) -> Agency:
    return Agency(Agent(name="A", model=ScriptedModel(step), tools=[record]), thread_store=store)
