"""A durable turn's events: written to the turn's DBOS stream as they happen, read back by offset from anywhere."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from dbos import DBOS

from .._base._events import Event, RawModelEvent, TextDelta

EVENTS = "events"
"""The stream key of a turn's events, in its workflow."""
DELTA_FLUSH_SECONDS = 0.05
"""Text deltas are written together at most this long after the first one waits (one database write each)."""


@dataclass(frozen=True, slots=True)
class DurableEvent:
    """One event of a durable turn. `id` is its place in the turn's stream (0, 1, ...): read again `after` it.

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
    """What makes an event about one stored thing unique (its type and call id), if it is one."""
    call_id = data.get("call_id")
    return f"{data.get('type')}:{data.get('agent')}:{call_id}" if isinstance(call_id, str) else None


class EventWriter:
    """Writes a running turn's events to its stream (inside the turn's DBOS step), text deltas in batches."""

    def __init__(self, attempt: str) -> None:
        self.attempt = attempt
        self._delta: dict[str, Any] | None = None
        self._since = 0.0

    async def write(self, event: Event) -> None:
        if isinstance(event, RawModelEvent):
            return  # the model's raw events stay in the Python stream: they are most of a turn's bytes
        if isinstance(event, TextDelta):
            await self._add_delta(event)
            return
        await self.flush()
        await self.write_data(event.to_dict())

    async def write_data(self, data: dict[str, Any]) -> None:
        await DBOS.write_stream_async(EVENTS, {"data": data, "attempt": self.attempt, "key": event_key(data)})

    async def _add_delta(self, event: TextDelta) -> None:
        held = self._delta
        if held is not None and (held["agent"], held["depth"]) != (event.agent, event.depth):
            await self.flush()
            held = None
        if held is None:
            self._delta, self._since = event.to_dict(), time.monotonic()
        else:
            held["delta"] += event.delta
        if time.monotonic() - self._since >= DELTA_FLUSH_SECONDS:
            await self.flush()

    async def flush(self) -> None:
        held, self._delta = self._delta, None
        if held is not None:
            await self.write_data(held)


async def read_events(turn_id: str, after: int | None) -> AsyncIterator[DurableEvent]:
    """The turn's events after id `after` (all with None), live until the turn ends; an event about what an
    earlier event already reported (a re-run step's) is left out, whether the reader saw it or not."""
    seen: set[str] = set()
    position = 0
    async for entry in DBOS.read_stream_async(turn_id, EVENTS, polling_interval_sec=0.05):
        key = entry.get("key")
        duplicate = key is not None and key in seen
        if key is not None:
            seen.add(key)
        if not duplicate and (after is None or position > after):
            data = entry["data"]
            yield DurableEvent(position, str(data.get("type")), data, str(entry.get("attempt")), key)
        position += 1
