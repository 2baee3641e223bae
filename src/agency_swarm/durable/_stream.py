"""A durable turn's events: written to the turn's DBOS stream in batches as they happen, read back from anywhere."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from dbos import DBOS

from .._base._events import Event, RawModelEvent, TextDelta

EVENTS = "events"
"""The stream key of a turn's events, in its workflow."""
BATCH_SECONDS = 0.05
"""An event is written at most this long after it happened, with the others of its batch (one database write)."""
READ_FALLBACK_SECONDS = 1.0
"""How often a reader looks at the stream when no notification woke it (PostgreSQL's LISTEN/NOTIFY wakes it at once
when a batch is written; this only bounds the wait when a notification was lost)."""


@dataclass(frozen=True, slots=True)
class DurableEvent:
    """One event of a durable turn. `id` is its place among the turn's events (0, 1, ...): read again `after` it.

    `attempt` names the run of the turn that wrote it: a worker that died mid-turn leaves events of an attempt whose
    unfinished text the next attempt does not continue (a `turn_attempt` event starts each attempt). `key`, when set,
    names what the event reports (a call's id): an attempt that reports it again is not delivered twice.
    """

    id: int
    type: str
    data: dict[str, Any]
    attempt: str
    key: str | None = None


def event_key(data: dict[str, Any]) -> str | None:
    """What makes an event about one stored thing unique, if it is one: a call's (its type and call id), or the
    turn's end (the entry agent's `agent_finished`: one per turn)."""
    call_id = data.get("call_id")
    if isinstance(call_id, str):
        return f"{data.get('type')}:{data.get('agent')}:{call_id}"
    if data.get("type") == "agent_finished" and data.get("depth") == 0:
        return "agent_finished:0"
    return None


class EventWriter:
    """Writes a running turn's events to its stream (inside the turn's DBOS step) in batches: the first event of a
    batch waits at most `BATCH_SECONDS`, and consecutive text deltas of one agent become one event. A stream entry
    is `{"attempt": ..., "events": [{"data": ..., "key": ...}, ...]}`, and the last one says `"end": true`."""

    def __init__(self, attempt: str) -> None:
        self.attempt = attempt
        self._held: list[dict[str, Any]] = []
        self._timer: asyncio.Task[None] | None = None
        self._writing = asyncio.Lock()  # batches reach the stream in the order they were taken
        self._failed: BaseException | None = None  # a timed write's error, raised by `end`

    async def write(self, event: Event) -> None:
        if isinstance(event, RawModelEvent):
            return  # the model's raw events stay in the Python stream: they are most of a turn's bytes
        if isinstance(event, TextDelta) and self._held:
            last = self._held[-1]["data"]
            if last.get("type") == "text_delta" and (last["agent"], last["depth"]) == (event.agent, event.depth):
                last["delta"] += event.delta
                return
        self.hold(event.to_dict())

    def hold(self, data: dict[str, Any]) -> None:
        """Add an event (its dict) to the batch; the batch is written within `BATCH_SECONDS` or at `end`."""
        self._held.append({"data": data, "key": event_key(data)})
        if self._timer is None:
            self._timer = asyncio.create_task(self._flush_later())

    async def _flush_later(self) -> None:
        await asyncio.sleep(BATCH_SECONDS)
        self._timer = None  # from here on this task is writing: `_stop_timer` no longer cancels it
        try:
            await self._write_held()
        except Exception as error:
            self._failed = error

    async def end(self) -> None:
        """Write what is held with the stream's end (`"end": true`): readers stop there. The turn's workflow does not
        close the stream as well (one database operation less per turn)."""
        await self._stop_timer()
        await self._write_held(end=True)
        self._raise_failed()

    def _raise_failed(self) -> None:
        failed, self._failed = self._failed, None
        if failed is not None:
            raise failed

    async def _stop_timer(self) -> None:
        """Cancel a batch's timer while it still sleeps (never a write under way: its thread would go on, and
        could land after the next batch)."""
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer

    async def aclose(self) -> None:
        """Leave nothing running after the step: a held batch stays unwritten (the step failed)."""
        await self._stop_timer()
        async with self._writing:  # a timed write under way ends first
            self._held.clear()

    async def _write_held(self, end: bool = False) -> None:
        async with self._writing:
            held, self._held = self._held, []
            if end:
                await DBOS.write_stream_async(EVENTS, {"attempt": self.attempt, "events": held, "end": True})
            elif held:
                await DBOS.write_stream_async(EVENTS, {"attempt": self.attempt, "events": held})


async def read_events(turn_id: str, after: int | None) -> AsyncIterator[DurableEvent]:
    """The turn's events after id `after` (all with None), live until the stream's end; an event about what an
    earlier event already reported (a re-run step's) is left out, whether the reader saw it or not. A turn whose
    step failed without an end (its worker stopping) ends the stream when its workflow does."""
    seen: set[str] = set()
    position = 0
    stream = DBOS.read_stream_async(turn_id, EVENTS, polling_interval_sec=READ_FALLBACK_SECONDS)
    async for entry in stream:
        attempt = str(entry.get("attempt"))
        for held in entry["events"]:
            key = held.get("key")
            duplicate = key is not None and key in seen
            if key is not None:
                seen.add(key)
            if not duplicate and (after is None or position > after):
                data = held["data"]
                yield DurableEvent(position, str(data.get("type")), data, attempt, key)
            position += 1
        if entry.get("end"):
            return


async def stream_ended(turn_id: str) -> None:
    """Returns when the turn's stream has ended (its last batch, or a stream DBOS closed or left with the turn)."""
    async for entry in DBOS.read_stream_async(turn_id, EVENTS, polling_interval_sec=READ_FALLBACK_SECONDS):
        if entry.get("end"):
            return
