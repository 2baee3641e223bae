"""The turn as a DBOS workflow of one step: the step starts the turn, or, run again, continues it from the store.

The store keeps the turn item by item (store first, then memory), and the turn's id is stored with its message, so
the step needs nothing from DBOS but being run again when its worker died: `Agency.get_response(turn_id=...)`
returns a finished turn's result or continues an unfinished one from its last stored item.
"""

from __future__ import annotations

import asyncio
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


_waiters: dict[str, set[asyncio.Future[None]]] = {}
"""Futures of this process' callers waiting for a turn to end (by id): set as soon as the turn ends here, without a
database round trip. A turn another worker runs never sets them; its waiters learn it from the database."""


def wait_here(turn_id: str) -> asyncio.Future[None]:
    """A future set when this process runs the turn to its end (`forget` it when done waiting)."""
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    _waiters.setdefault(turn_id, set()).add(future)
    return future


def forget(turn_id: str, future: asyncio.Future[None]) -> None:
    waiting = _waiters.get(turn_id)
    if waiting is not None:
        waiting.discard(future)
        if not waiting:
            del _waiters[turn_id]


def _tell(turn_id: str) -> None:
    for future in _waiters.pop(turn_id, ()):
        future.get_loop().call_soon_threadsafe(_set, future)


def _set(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@DBOS.workflow(name="agency_swarm.turn")
async def turn_workflow(request: dict[str, Any]) -> RunResult:
    """One top-level turn: `request` holds chat_id, turn_id (the workflow's id), and message and recipient_agent,
    or for a resume, `resume` ({"approve": [...], "reject": [...]})."""
    try:
        result = await turn_step(request)
    except Exception:
        await _ended(request["turn_id"])
        raise
    await _ended(request["turn_id"])
    return result


async def _ended(turn_id: str) -> None:
    """The turn is done or failed: its stream closes and this process' waiters are told. A workflow cut short
    (cancelled, or its worker shutting down) leaves its stream open: the run that takes it over writes on."""
    await DBOS.close_stream_async(EVENTS)
    _tell(turn_id)


@DBOS.step(name="agency_swarm.turn_step", retries_allowed=False)
async def turn_step(request: dict[str, Any]) -> RunResult:
    if not _running:
        raise RuntimeError("agency_swarm.durable: no DurableTurns is launched in this process to run the turn.")
    writer = EventWriter(uuid.uuid4().hex[:12])
    writer.hold({"type": "turn_attempt", "attempt": writer.attempt, "turn_id": request["turn_id"]})
    try:
        return await _running[0](request, writer)
    finally:
        await writer.aclose()
