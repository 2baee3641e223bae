"""The top-level turns a ThreadManager runs now, by chat: what `Agency.cancel` finds and stops."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from typing import Literal

CancelOutcome = Literal["cancelled", "other_turn"]
"""What a process running a turn of the chat answers a cancel: it stopped that turn, or it runs another one."""

_PROCESS = uuid.uuid4().hex[:12]
_made = itertools.count(1)
"""A turn started without an id runs under `run-<process>-<n>`: unique across processes sharing a store."""

CANCEL_WAIT_SECONDS = 10.0
"""How long a cancel waits for the turn to have stopped (its clean-up writes are bounded by CLEAN_UP_SECONDS)."""


class RunningTurn:
    """One top-level turn of this process: its id (the caller's `turn_id`, else one made for it, `run-...`, kept
    only here), the task it runs in, and whether a cancel asked it to stop (then its CancelledError is that)."""

    __slots__ = ("_ended", "_turn_id", "chat_id", "requested", "task")

    def __init__(self, chat_id: str, turn_id: str | None, task: asyncio.Task[object] | None) -> None:
        self.chat_id, self._turn_id, self.task = chat_id, turn_id, task
        self.requested = False
        self._ended: asyncio.Event | None = None  # made only when a cancel waits for the end: most turns never

    @property
    def turn_id(self) -> str:
        """The caller's id, else one made for this turn when first asked (most turns are never asked)."""
        turn_id = self._turn_id
        if turn_id is None:
            turn_id = self._turn_id = f"run-{_PROCESS}-{next(_made)}"
        return turn_id

    def ended(self) -> asyncio.Event:
        if self._ended is None:
            self._ended = asyncio.Event()
        return self._ended

    def request_cancel(self) -> None:
        if self.requested or self.task is None or self.task.done():
            return
        self.requested = True
        loop = self.task.get_loop()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self.task.cancel("the turn was cancelled")
        else:
            loop.call_soon_threadsafe(self.task.cancel, "the turn was cancelled")

    def withdraw(self) -> bool:
        """Whether a CancelledError leaving the turn is the cancel's: then it is withdrawn from the task (the turn
        raises TurnCancelled instead, and its clean-up awaits as usual)."""
        if not self.requested or self.task is None:
            return False
        self.task.uncancel()
        return True


class RunningTurns:
    """The running (or lock-waiting) top-level turns of one manager, by chat, oldest first."""

    def __init__(self) -> None:
        self._by_chat: dict[str, list[RunningTurn]] = {}

    @classmethod
    def on(cls, store: object) -> RunningTurns:
        """A manager's running turns; a store shared by processes (`on_cancel`) hands them the cancels others get."""
        running = cls()
        on_cancel = getattr(store, "on_cancel", None)
        if on_cancel is not None:
            on_cancel(running.cancel_here)
        return running

    def enter(self, chat_id: str, turn_id: str | None) -> RunningTurn:
        entry = RunningTurn(chat_id, turn_id, asyncio.current_task())
        self.add(entry)
        return entry

    def add(self, entry: RunningTurn) -> None:
        turns = self._by_chat.get(entry.chat_id)
        if turns is None:
            self._by_chat[entry.chat_id] = [entry]
        else:
            turns.append(entry)

    def leave(self, entry: RunningTurn) -> None:
        if entry._ended is not None:
            entry._ended.set()
        turns = self._by_chat.get(entry.chat_id)
        if turns is not None and entry in turns:
            if len(turns) == 1:
                del self._by_chat[entry.chat_id]
            else:
                turns.remove(entry)

    def find(self, chat_id: str, turn_id: str | None = None) -> RunningTurn | None:
        """The turn `turn_id` of the chat, if it runs (or waits for the chat) here; with None, the chat's oldest."""
        for entry in self._by_chat.get(chat_id, ()):
            if turn_id is None or entry._turn_id == turn_id:  # an id never made is one nobody knows
                return entry
        return None

    def runs(self, chat_id: str) -> bool:
        return chat_id in self._by_chat

    async def cancel_here(self, chat_id: str, turn_id: str | None) -> CancelOutcome | None:
        """Stop the turn if it runs here and wait (bounded) until it has; "other_turn" when the chat runs another
        turn here, None when it runs none here."""
        entry = self.find(chat_id, turn_id)
        if entry is None:
            return "other_turn" if self.runs(chat_id) else None
        entry.request_cancel()
        if entry.task is None or entry.task.get_loop() is not asyncio.get_running_loop():
            return "cancelled"  # a turn of another event loop: its `ended` is that loop's to wait on
        with contextlib.suppress(TimeoutError):  # it stops at its next await; the caller is told it was cancelled
            await asyncio.wait_for(asyncio.shield(entry.ended().wait()), CANCEL_WAIT_SECONDS)
        return "cancelled"
