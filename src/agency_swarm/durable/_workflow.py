"""The turn as a DBOS workflow of one step: the step starts the turn, or, run again, continues it from the store.

The store keeps the turn item by item (store first, then memory), and the turn's id is stored with its message, so
the step needs nothing from DBOS but being run again when its worker died: `Agency.get_response(turn_id=...)`
returns a finished turn's result or continues an unfinished one from its last stored item.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from dbos import DBOS

from .._turn._results import RunResult
from ._stream import EVENTS, EventWriter

TurnRunner = Callable[[dict[str, Any], EventWriter], Awaitable[RunResult]]
_running: list[TurnRunner] = []
"""The launched `DurableTurns`' runner (one per process: DBOS is one per process)."""


def serve_turns(runner: TurnRunner | None) -> None:
    _running.clear()
    if runner is not None:
        _running.append(runner)


@DBOS.workflow(name="agency_swarm.turn")
async def turn_workflow(request: dict[str, Any]) -> RunResult:
    """One top-level turn: `request` holds chat_id, turn_id (the workflow's id), and message and recipient_agent,
    or for a resume, `resume` ({"approve": [...], "reject": [...]})."""
    try:
        return await turn_step(request)
    finally:
        await DBOS.close_stream_async(EVENTS)


@DBOS.step(name="agency_swarm.turn_step", retries_allowed=False)
async def turn_step(request: dict[str, Any]) -> RunResult:
    if not _running:
        raise RuntimeError("agency_swarm.durable: no DurableTurns is launched in this process to run the turn.")
    writer = EventWriter(uuid.uuid4().hex[:12])
    await writer.write_data({"type": "turn_attempt", "attempt": writer.attempt, "turn_id": request["turn_id"]})
    return await _running[0](request, writer)
