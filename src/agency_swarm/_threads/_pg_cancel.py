"""Cancels across processes on PostgreSQL: a NOTIFY asks, the process running the chat's turn stops it and answers.

The ask goes out on the asking process's turn lock session, in one statement with a look at `pg_locks`: when no
session holds the chat's turn lock, no process runs a turn of it, and nobody is waited for. The process that holds
it listens on its own lock session (connected while it holds the lock), stops the turn (`RunningTurns.cancel_here`:
it answers once the turn has stopped) and answers on the same channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from .._base._redact import secret_free_logger
from ._running import CANCEL_WAIT_SECONDS, CancelOutcome

logger = secret_free_logger("agency_swarm")

CANCEL_CHANNEL = "agency_swarm_cancel"
CANCEL_ANSWER_SECONDS = CANCEL_WAIT_SECONDS + 5.0
"""How long an ask waits for the answer of the process holding the chat (it answers once the turn has stopped)."""
_SQL_ASK_CANCEL = (
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND granted "
    "AND classid = (hashtext('agency_swarm_turn')::bigint & 4294967295)::oid "
    "AND objid = ($1::int4::bigint & 4294967295)::oid) FROM (SELECT pg_notify('agency_swarm_cancel', $2::text)) AS n"
)

CancelHandler = Callable[[str, str | None], Awaitable[CancelOutcome | None]]
"""A manager's `RunningTurns.cancel_here`."""


class CancelChannel:
    """One process's side of the channel: the managers' handlers that answer asks, and the asks waiting for answers."""

    def __init__(self, handlers: list[CancelHandler]) -> None:
        self.handlers = handlers
        self._waiting: dict[str, asyncio.Future[CancelOutcome]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def ask(self, chat_id: str, turn_id: str | None) -> tuple[str, str]:
        """The payload of an ask, and its reply id (`answer` waits for it; `forget` it after)."""
        reply = uuid.uuid4().hex
        self._waiting[reply] = asyncio.get_running_loop().create_future()
        return json.dumps({"op": "cancel", "chat": chat_id, "turn": turn_id, "reply": reply}), reply

    async def answer(self, reply: str) -> CancelOutcome | None:
        with contextlib.suppress(TimeoutError):
            return await asyncio.wait_for(asyncio.shield(self._waiting[reply]), CANCEL_ANSWER_SECONDS)
        return None

    def forget(self, reply: str) -> None:
        self._waiting.pop(reply, None)

    def notified(self, notify: Callable[[str], Awaitable[None]]) -> Callable[[Any, int, str, str], None]:
        """The asyncpg listener: answers reach their asks; an ask is handed to this process's managers."""

        def heard(_session: Any, _pid: int, _channel: str, payload: str) -> None:
            try:
                message = json.loads(payload)
                op, reply = message["op"], str(message["reply"])
            except (ValueError, KeyError, TypeError):
                return
            if op == "answer":
                waiting = self._waiting.get(reply)
                if waiting is not None and not waiting.done():
                    waiting.set_result(message.get("outcome"))
            elif op == "cancel" and reply not in self._waiting:  # not our own ask
                task = asyncio.ensure_future(self._handle(message, reply, notify))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

        return heard

    async def _handle(self, message: dict[str, Any], reply: str, notify: Callable[[str], Awaitable[None]]) -> None:
        chat, turn = str(message.get("chat")), message.get("turn")
        for handler in list(self.handlers):
            outcome = await handler(chat, turn if isinstance(turn, str) else None)
            if outcome is not None:
                try:
                    await notify(json.dumps({"op": "answer", "reply": reply, "outcome": outcome}))
                except Exception as error:  # the asker waits its bound, then reads the store
                    logger.warning("A cancel's answer could not be sent: %s", type(error).__name__)
                return
