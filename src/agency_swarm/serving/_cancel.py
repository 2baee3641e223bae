"""`POST /chats/{chat_id}/turns/{turn_id}:cancel`: stop a running turn (plain or durable) on the worker running it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Path
from pydantic import BaseModel

from ._bodies import failure_response
from ._openapi import route_docs
from ._routes import ChatId
from ._text import model_response

Cancel = Callable[[str, str], Awaitable[None]]
"""Stops the chat's turn and returns once it has stopped (`Agency.cancel`, or `DurableTurns.cancel`)."""

TurnId = Annotated[
    str,
    Path(
        description=(
            "The turn's id: the `turn-id` header of its response (a stream's comes first), or of the 202 that "
            "queued it (durable mode)."
        ),
        min_length=1, max_length=200,
    ),
]


class CancelledTurn(BaseModel):
    """A turn a cancel stopped: its stream ended with a `cancelled` event, its caller got 409 `cancelled`."""

    turn_id: str
    chat_id: str
    status: Literal["cancelled"] = "cancelled"


def add_cancel_route(app: FastAPI, cancel: Cancel, *, protected: bool) -> None:
    @app.post(
        "/chats/{chat_id}/turns/{turn_id}:cancel", response_model=CancelledTurn, operation_id="cancel_turn",
        **route_docs(400, 401, 404, 409, 422, 500, 503, protected=protected),
    )
    async def cancel_turn(chat_id: ChatId, turn_id: TurnId) -> Any:
        """Stop the running turn where it stands (between model calls, or inside a tool: the cut call gets the
        "interrupted" output), on whichever worker runs it, and answer once it has stopped. 404 for a turn the
        chat never had, 409 `turn_not_running` for one that has ended."""
        try:
            await cancel(chat_id, turn_id)
        except Exception as exc:
            return failure_response(exc, chat_id)
        return model_response(CancelledTurn(turn_id=turn_id, chat_id=chat_id))
