"""Cancelling a top-level turn: its entry in the manager's running turns, and how it ends once a cancel stopped it."""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any

from .._base._errors import TurnCancelled, TurnNotRunning, UnknownTurn
from .._base._events import TurnCancelledEvent
from .._threads._manager import ConversationThread, ThreadManager, clean_up
from .._threads._running import RunningTurn
from .._threads._thread_items import cancel_mark, is_cancel_mark, turn_start
from ._channel import to_reader
from ._results import ResponseStream
from ._state import USER_CALLER


class cancellable(RunningTurn):
    """`async with cancellable(...) as entry`: the turn is listed as running while inside (it is its own entry in
    the manager's running turns); a cancel's CancelledError leaves as TurnCancelled (a stream's last event then is
    `cancelled`). A turn stopped once it held its chat has stored its cancel mark (`stopped`) first. A class, not a
    generator: no generator object per turn."""

    __slots__ = ("agent", "manager", "stream")

    def __init__(
        self, manager: ThreadManager, chat_id: str, turn_id: str | None, stream: ResponseStream | None, agent: str
    ) -> None:
        RunningTurn.__init__(self, chat_id, turn_id, asyncio.current_task())
        self.manager, self.stream, self.agent = manager, stream, agent
        manager.running.add(self)
        if stream is not None:
            stream.turn_id = self.turn_id

    async def __aenter__(self) -> RunningTurn:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if error is None:
            self.manager.running.leave(self)
            return
        try:
            if isinstance(error, asyncio.CancelledError) and self.withdraw():
                await _told(self, self.stream, self.agent)
                raise _cancelled(self) from None
            if isinstance(error, TurnCancelled):
                await _told(self, self.stream, self.agent)
        finally:
            self.manager.running.leave(self)


async def stopped(manager: ThreadManager, entry: RunningTurn, thread: ConversationThread | None) -> TurnCancelled:
    """Under the chat's lock, once the turn's own clean-up ran (its cut calls have the "interrupted" output, the
    chat is saved): the cancel mark ends the entry agent's thread, so the turn is over, not waiting for a resume.
    Called with a CancelledError leaving the turn: one that no cancel asked for is raised again."""
    if not entry.requested:
        raise
    entry.withdraw()
    manager.paused_turns.pop(entry.chat_id, None)
    if thread is not None:
        thread.has_marks = True
        await clean_up(thread.extend([cancel_mark(entry.turn_id)]),
                       f"storing the cancel mark of chat {entry.chat_id!r}")
        if manager.saves_turns:
            await clean_up(manager.save(entry.chat_id), f"saving chat {entry.chat_id!r}")
    return _cancelled(entry)


def _cancelled(entry: RunningTurn) -> TurnCancelled:
    return TurnCancelled(
        f"Turn {entry.turn_id!r} of chat {entry.chat_id!r} was cancelled.", chat_id=entry.chat_id,
        turn_id=entry.turn_id,
    )


async def _told(entry: RunningTurn, stream: ResponseStream | None, agent: str) -> None:
    if stream is None:
        return
    stream._cancelled = _cancelled(entry)
    if stream.streaming:
        await to_reader(TurnCancelledEvent(
            agent=agent, caller=USER_CALLER, depth=0, chat_id=entry.chat_id, turn_id=entry.turn_id
        ))


async def cancel_turn(manager: ThreadManager, chat_id: str, turn_id: str | None) -> None:
    """Stop the chat's turn `turn_id` (None: whichever runs) where it stands, in this process or, on a store shared
    by processes, in the one running it; returns once it has stopped. UnknownTurn (404) when the chat holds no turn
    of that id, TurnNotRunning (409) when the turn has ended."""
    outcome = await manager.running.cancel_here(chat_id, turn_id)
    elsewhere = getattr(manager.store, "cancel_elsewhere", None)
    if outcome is None and elsewhere is not None:
        outcome = await elsewhere(chat_id, turn_id)
    if outcome == "cancelled":
        return
    if turn_id is None:
        raise TurnNotRunning(f"Chat {chat_id!r} runs no turn now: nothing to cancel.")
    threads = await manager.store.load(chat_id) if manager.store is not None else _held(manager, chat_id)
    if any(key.startswith(f"{USER_CALLER}->") and (turn_start(items, turn_id) is not None or any(
        is_cancel_mark(item) and item.get("turn_id") == turn_id for item in items
    )) for key, items in threads.items()):
        raise TurnNotRunning(f"Turn {turn_id!r} of chat {chat_id!r} has ended: nothing to cancel.")
    raise UnknownTurn(f"Chat {chat_id!r} has no turn {turn_id!r}.")


def _held(manager: ThreadManager, chat_id: str) -> dict[str, list[dict[str, Any]]]:
    return manager.get_threads(chat_id, include_marks=True) if manager.is_loaded(chat_id) else {}
