"""Observers of durable turns: code of a layer above that follows a turn from inside its step (its events, its end),
on whichever worker runs the turn, so what it keeps up to date is kept by whoever finishes the turn."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._base._events import Event
from .._base._redact import secret_free_logger
from .._turn._results import RunResult

logger = secret_free_logger("agency_swarm.durable")


@dataclass(frozen=True)
class Observed:
    """A turn's observer, by the name it was registered under (`DurableTurns.observe`), and what the observer is told
    with each of the turn's events (stored with the turn: plain data that pickles)."""

    name: str
    data: Mapping[str, Any] = field(default_factory=dict)


class TurnObserver(Protocol):
    """Told each event of an observed turn as its step writes it, then its end: the RunResult, or the error it ended
    with (`TurnFailed`, or `TurnCancelled` for a cancelled turn). A turn run again after a crash tells its observer
    again, from where the run picks up: what an observer writes is written so that writing it twice is harmless."""

    async def event(self, data: Mapping[str, Any], event: Event) -> None: ...

    async def ended(self, data: Mapping[str, Any], outcome: RunResult | Exception) -> None: ...


def observed_request(request: dict[str, Any], observed: Observed | None) -> dict[str, Any]:
    if observed is not None:
        if not isinstance(observed, Observed):
            raise TypeError(f"observed must be an Observed, got {type(observed).__name__}.")
        request["observed"] = {"name": observed.name, "data": dict(observed.data)}
    return request


async def tell_event(observer: TurnObserver | None, request: Mapping[str, Any], event: Event) -> None:
    """An observer that fails is logged; the turn goes on."""
    if observer is None:
        return
    try:
        await observer.event(request["observed"]["data"], event)
    except Exception:
        logger.warning("Turn %s: its observer failed on an event", request.get("turn_id"), exc_info=True)


async def tell_ended(observer: TurnObserver | None, request: Mapping[str, Any], outcome: RunResult | Exception) -> None:
    if observer is None:
        return
    try:
        await observer.ended(request["observed"]["data"], outcome)
    except Exception:
        logger.error("Turn %s: its observer failed on the turn's end", request.get("turn_id"), exc_info=True)
