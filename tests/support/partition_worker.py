"""Worker A of tests/serving/test_partition.py: one agency on PostgreSQL, run inside a network namespace.

`python partition_worker.py STORE_URL CHAT_ID MODE SECONDS` starts a turn of CHAT_ID ("start") whose model calls
`wait_for_go`, a tool that waits for the test. MODE "watch" is the worker as shipped; "fence" is a worker that does
not notice its lock session going silent (its socket options are left out), so that only the fencing token keeps
it from writing to a chat another worker took. SECONDS is its `lock_session_timeout`.

It reports on stdout, one JSON object a line: `tool_started`, `tool_cancelled` or `tool_returned`, then
`turn_done` or `turn_failed` (the exception's type and message), and for the next turn `model_input` (what its
model was given) and `again_done`. It obeys lines on stdin:
`go` (the tool returns) and `again` (one more turn of the chat, "again"); it exits when stdin closes.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import agents

from agency_swarm import Agency, Agent, SQLThreadStore, function_tool
from agency_swarm._threads import _pg_turn_locks
from agency_swarm.testing import ModelCall, ScriptedModel, Step, ToolCall


def report(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def reply(call: ModelCall) -> Step:
    if call.tool_outputs:
        return f"A: finished after {call.tool_outputs[-1]}"
    if call.last_user_message == "start":
        return ToolCall("wait_for_go")
    report("model_input", input=call.input)
    return "A: again"


async def commands() -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


async def main(url: str, chat_id: str, mode: str, seconds: float) -> None:
    agents.set_tracing_disabled(True)
    if mode == "fence":
        _pg_turn_locks.watch_socket = lambda session, seconds: None  # type: ignore[assignment]
    go, again = asyncio.Event(), asyncio.Event()

    @function_tool
    async def wait_for_go() -> str:
        """Waits until the test says go."""
        report("tool_started")
        try:
            await go.wait()
        except asyncio.CancelledError:
            report("tool_cancelled")
            raise
        report("tool_returned")
        return "go received"

    async def obey(reader: asyncio.StreamReader) -> None:
        while line := (await reader.readline()).decode().strip():
            {"go": go, "again": again}[line].set()

    listening = asyncio.create_task(obey(await commands()))
    store = SQLThreadStore(url, lock_session_timeout=seconds)
    async with Agency(Agent(name="Helper", model=ScriptedModel(reply), tools=[wait_for_go]), thread_store=store) as a:
        try:
            result = await a.get_response("start", chat_id=chat_id)
            report("turn_done", output=str(result.final_output))
        except Exception as error:
            chat = getattr(error, "chat_id", None)
            report("turn_failed", error=type(error).__name__, message=str(error), chat_id=chat)
        await again.wait()
        result = await a.get_response("again", chat_id=chat_id)
        report("again_done", output=str(result.final_output))
        await listening  # until stdin closes


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])))
