"""The agency the serving tests' uvicorn workers build (`--factory serving_app:build_agency`), with scripted models.

CEO delegates every user message to Developer and reports back; both say how many user messages they have seen
on their thread, so a worker that answered from a stale copy of a chat is caught. A Developer message holding
`[hold]` first asks the test's gate (a TCP server at $AGENCY_SWARM_TEST_GATE) and waits for its "go": the test
learns which worker process runs the nested turn, and can kill it there.
"""

from __future__ import annotations

import asyncio
import os
import re
from typing import Any

from agents import set_tracing_disabled

from agency_swarm import Agency, Agent
from agency_swarm._threads._store import ThreadStore
from agency_swarm.testing import ModelCall, ScriptedModel, Step, send_message

GATE_ENV = "AGENCY_SWARM_TEST_GATE"
set_tracing_disabled(True)  # as in every test: nothing leaves the machine
HOLD = "[hold]"


def user_messages(call: ModelCall) -> int:
    return sum(1 for item in call.input if item.get("role") == "user" and "type" not in item)


def ceo_script(call: ModelCall) -> Step:
    if not call.tool_outputs:
        return send_message("Developer", f"Please do: {call.last_user_message}")
    return f"turn {user_messages(call)}: {call.tool_outputs[-1]}"


def developer_script(call: ModelCall) -> Step:
    return f"done by {os.getpid()} after {user_messages(call)} message(s): {call.last_user_message}"


def ceo_answer(turn: int, message: str, developer_pid: str = r"\d+") -> str:
    """What ceo_script answers at the chat's turn number `turn` (a regex: the pid is the worker's)."""
    return rf"turn {turn}: done by {developer_pid} after {turn} message\(s\): Please do: {re.escape(message)}"


class GatedModel(ScriptedModel):
    """A ScriptedModel that, for a message holding HOLD, waits for the test's gate before answering."""

    async def _gate(self, input: Any) -> None:
        address = os.environ.get(GATE_ENV)
        if address is None or not isinstance(input, list):
            return
        last = next((item for item in reversed(input) if item.get("role") == "user"), {})
        if HOLD not in str(last.get("content", "")):
            return
        host, _, port = address.rpartition(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            writer.write(f"{os.getpid()}\n".encode())
            await writer.drain()
            answer = await reader.readline()  # the test answers "go", or kills this process meanwhile
        finally:
            writer.close()
        if answer.strip() != b"go":
            raise RuntimeError(f"the test's gate answered {answer!r} instead of go")

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        await self._gate(args[1])
        return await super().get_response(*args, **kwargs)

    async def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        await self._gate(args[1])
        async for event in super().stream_response(*args, **kwargs):
            yield event


def build_agency(store: ThreadStore) -> Agency:
    ceo = Agent(name="CEO", description="Talks to the user.", model=ScriptedModel(ceo_script, name="ceo"))
    developer = Agent(name="Developer", description="Does the work.", model=GatedModel(developer_script, name="dev"))
    return Agency([ceo, [ceo, developer]], thread_store=store)


def config_models() -> dict[str, ScriptedModel]:
    """The same models for an agency file's CEO and Developer: `--models serving_app:config_models`."""
    return {"CEO": ScriptedModel(ceo_script, name="ceo"), "Developer": GatedModel(developer_script, name="dev")}


def long_text(message: str) -> str:
    """For `long KB WORD`: about KB kilobytes made of WORD-character words (each streamed as one delta)."""
    _, size, word = message.split()
    words = int(size) * 1024 // (int(word) + 1)
    return " ".join(f"{number:0{int(word)}d}" for number in range(words))


def long_answer(call: ModelCall) -> Step:
    return long_text(call.last_user_message)


def build_long_agency(store: ThreadStore) -> Agency:
    """One agent that answers `long KB WORD` with a long text: what a reader that stops reading must not hold."""
    return Agency(Agent(name="CEO", model=ScriptedModel(long_answer, name="long")), thread_store=store)
