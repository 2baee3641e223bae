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
from ._stream import EventWriter

TurnRunner = Callable[[dict[str, Any], EventWriter], Awaitable[RunResult]]
_running: list[TurnRunner] = []
"""The launched `DurableTurns`' runner (one per process: DBOS is one per process)."""


def serve_turns(runner: TurnRunner | None) -> None:
    _running.clear()
    if runner is not None:
        _running.append(runner)


class Waiter:
    """A caller of this process waiting for a turn: `started` is set when the turn starts running here, `ended` when
    it ends here (True: cut short, as when the worker stops; it goes on elsewhere). Told in memory, without a
    database round trip; a turn another worker runs never sets them."""

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self.started: asyncio.Future[None] = loop.create_future()
        self.ended: asyncio.Future[bool] = loop.create_future()


_waiters: dict[str, set[Waiter]] = {}


def wait_here(turn_id: str) -> Waiter:
    """A `Waiter` for the turn (`forget` it when done waiting)."""
    waiter = Waiter()
    _waiters.setdefault(turn_id, set()).add(waiter)
    return waiter


def forget(turn_id: str, waiter: Waiter) -> None:
    waiting = _waiters.get(turn_id)
    if waiting is not None:
        waiting.discard(waiter)
        if not waiting:
            del _waiters[turn_id]


def _tell(turn_id: str, started: bool = False, cut: bool = False) -> None:
    for waiter in list(_waiters.get(turn_id, ())):
        future: asyncio.Future[Any] = waiter.started if started else waiter.ended
        future.get_loop().call_soon_threadsafe(_set, future, None if started else cut)


def _set(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


@DBOS.workflow(name="agency_swarm.turn")
async def turn_workflow(request: dict[str, Any]) -> RunResult:
    """One top-level turn: `request` holds chat_id, turn_id (the workflow's id), and message and recipient_agent,
    or for a resume, `resume` ({"approve": [...], "reject": {call id: message or None}}; a list of call ids in a
    request stored by an earlier version)."""
    _tell(request["turn_id"], started=True)
    try:
        result = await turn_step(request)
    except Exception:
        _tell(request["turn_id"])
        raise
    except BaseException:  # cut short (cancelled, or the worker stopping): the run that takes it over goes on
        _tell(request["turn_id"], cut=True)
        raise
    _tell(request["turn_id"])
    return result


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
