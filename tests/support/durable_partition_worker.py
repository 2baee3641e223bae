"""A durable worker for tests/durable/test_durable_partition.py:
`python durable_partition_worker.py URL EXECUTOR QUEUE EXPIRE LOCK_SESSION_TIMEOUT MODE`.

durable_worker.py's worker, with everything it sends to PostgreSQL going to URL (the store and its lock session,
DBOS, the heartbeat, and the tool's own connection: run in a network namespace, all of it crosses the link the test
cuts), its store's `lock_session_timeout`, and reports that say what its turns did. MODE "watch" is the worker as
shipped; "fence" leaves out the lock session's socket options (as partition_worker.py does), so the worker does not
notice a cut and only the fencing token refuses its late write.

Stdin: `submit CHAT KEY MESSAGE` prints `turn <turn_id>`. Stdout, one report a line:
- `ready` once launched;
- the tool `record(note)` (durable_app's agent; it inserts (call_id, note) into durable_side_effects) prints, for a
  note "block GATE", `blocked <call_id>`, waits for `NOTIFY durable_gate, 'GATE'`, then prints `unblocked <call_id>`
  (or `cancelled <call_id>` when its turn is stopped);
- `lock_lost <turn_id>` when a run of the turn raised TurnLockLost (the step then runs the turn again);
- `run_returned <turn_id> <final output>` or `run_raised <turn_id> <exception type>` when a run of the turn's step
  ends;
- `dbos_warning <message>` for each warning DBOS logs (e.g. a workflow this worker no longer owns, parked).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

import agents
import asyncpg
from agents import function_tool
from agents.tool_context import ToolContext

from agency_swarm import Agency, Agent, SQLThreadStore, TurnLockLost
from agency_swarm._threads import _pg_turn_locks
from agency_swarm.durable import DurableTurns
from agency_swarm.testing import ScriptedModel
from durable_app import step


def say(*words: object) -> None:
    print(*words, flush=True)


class SayWarnings(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        say("dbos_warning", record.getMessage().replace("\n", " "))


def recorder(url: str) -> Any:
    @function_tool
    async def record(context: ToolContext[object], note: str) -> str:
        """Record a note."""
        connection = await asyncpg.connect(url)
        try:
            await connection.execute("INSERT INTO durable_side_effects VALUES ($1, $2)", context.tool_call_id, note)
            if note.startswith("block "):
                opened, gate = asyncio.Event(), note.removeprefix("block ")
                await connection.add_listener("durable_gate", lambda *args: args[3] == gate and opened.set())
                say("blocked", context.tool_call_id)
                try:
                    await opened.wait()
                except asyncio.CancelledError:
                    say("cancelled", context.tool_call_id)
                    connection.terminate()  # a close would wait on a link that may be cut
                    raise
                say("unblocked", context.tool_call_id)
        finally:
            if not connection.is_closed():
                await connection.close()
        return f"recorded {note}"

    return record


def report_runs(turns: DurableTurns) -> None:
    """Wrap the worker's turn runs (before launch, which hands `_run` to the workflow) to report what they did."""
    run, streamed = turns._run, turns._streamed

    async def reported_streamed(request: dict[str, Any], writer: Any) -> Any:
        try:
            return await streamed(request, writer)
        except TurnLockLost:
            say("lock_lost", request["turn_id"])
            raise

    async def reported_run(request: dict[str, Any], writer: Any) -> Any:
        try:
            result = await run(request, writer)
        except BaseException as error:
            say("run_raised", request["turn_id"], type(error).__name__)
            raise
        say("run_returned", request["turn_id"], result.final_output)
        return result

    turns._streamed = reported_streamed  # type: ignore[method-assign]
    turns._run = reported_run  # type: ignore[method-assign]


async def main(url: str, executor: str, queue: str, expire: float, lock_timeout: float, mode: str) -> None:
    agents.set_tracing_disabled(True)
    if mode == "fence":
        _pg_turn_locks.watch_socket = lambda session, seconds: None  # type: ignore[assignment]
    agency = Agency(Agent(name="A", model=ScriptedModel(step), tools=[recorder(url)]),
                    thread_store=SQLThreadStore(url, lock_session_timeout=lock_timeout))
    turns = DurableTurns(
        agency, database_url=url, executor_id=executor, queue_name=queue, heartbeat_seconds=expire / 4,
        expire_after_seconds=expire,
    )
    report_runs(turns)
    await turns.launch()
    logging.getLogger("dbos").addHandler(SayWarnings(logging.WARNING))
    say("ready")
    loop = asyncio.get_running_loop()
    try:
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            _, chat, key, message = line.rstrip("\n").split(" ", 3)
            handle = await turns.submit(message, chat_id=chat, key=key)
            say("turn", handle.turn_id)
        await asyncio.Event().wait()  # stdin closed: keep working the queue until killed
    finally:
        await turns.aclose()
        await agency.aclose()


if __name__ == "__main__":
    mode = sys.argv[6]
    assert mode in ("watch", "fence"), mode
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), mode))
