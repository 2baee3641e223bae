"""GET /chats: the caller's chats, newest activity first, a page at a time (an opaque cursor for the next)."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import FastAPI, Query, Request, Response
from pydantic import BaseModel, Field

from ..._threads._chat_index import ChatEntry, ChatIndex
from .._bodies import ErrorResponse, error_response, failure_response
from .._openapi import bearer_extra
from .._text import model_response
from ._principal import principal_of

DEFAULT_PAGE = 20
MAX_PAGE = 100
MAX_CURSOR_CHARS = 1024


class ChatSummary(BaseModel):
    """One of the caller's chats."""

    chat_id: str
    title: str | None = Field(description="Its first user message, whitespace collapsed, cut to 80 characters.")
    created_at: datetime = Field(description="When its first message was posted (UTC).")
    last_activity_at: datetime = Field(description="When its last message was posted (UTC).")


class ChatListResponse(BaseModel):
    chats: list[ChatSummary] = Field(description="Newest activity first.")
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


def _time(microseconds: int) -> datetime:
    return datetime.fromtimestamp(microseconds / 1_000_000, tz=UTC)


def _summary(entry: ChatEntry) -> ChatSummary:
    return ChatSummary(
        chat_id=entry.chat_id, title=entry.title, created_at=_time(entry.created_us),
        last_activity_at=_time(entry.active_us),
    )


def encode_cursor(position: tuple[int, str]) -> str:
    text = json.dumps(list(position), ensure_ascii=True, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str] | None:
    """The position a cursor this server gave stands for; None for anything else."""
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error, RecursionError):
        return None
    if (
        not isinstance(value, list) or len(value) != 2 or isinstance(value[0], bool)
        or not isinstance(value[0], int) or not isinstance(value[1], str)
    ):
        return None
    return value[0], value[1]


_LIST_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorResponse, "description": "bad_request: a cursor this server did not give"},
    401: {"model": ErrorResponse, "description": "unauthorized: no bearer token, or one that is not valid"},
    422: {"model": ErrorResponse, "description": "invalid_request: `limit` out of range"},
    503: {"model": ErrorResponse, "description": "store_unavailable: the thread store cannot be reached"},
}


def add_chat_list_route(app: FastAPI, index: ChatIndex, *, protected: bool) -> None:
    responses = {status: doc for status, doc in _LIST_ERRORS.items() if protected or status != 401}
    chat = {"chat_id": "$response.body#/chats/0/chat_id"}
    responses[200] = {"links": {
        name: {"operationId": name, "parameters": chat} for name in ("get_threads", "delete_chat", "post_message")
    }}

    @app.get(
        "/chats", response_model=ChatListResponse, operation_id="list_chats", tags=["chats"], responses=responses,
        openapi_extra=bearer_extra(protected=protected),
    )
    async def list_chats(
        http: Request,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="Chats per page.")] = DEFAULT_PAGE,
        cursor: Annotated[
            str | None, Query(max_length=MAX_CURSOR_CHARS, description="`next_cursor` of the page before.")
        ] = None,
    ) -> Response:
        """The caller's chats (those it posted a first message to, not deleted), newest activity first, each with
        its title and last activity. A chat whose activity changes between pages may show on two pages or none."""
        after = None
        if cursor is not None:
            after = decode_cursor(cursor)
            if after is None:
                return error_response(400, "bad_request", "The cursor is not one this server gave; start without it.")
        try:
            entries = await index.owned_chats(principal_of(http.scope).name, after, limit + 1)
        except Exception as exc:
            return failure_response(exc, "(list)")
        shown = entries[:limit]
        more = len(entries) > limit and bool(shown)
        page = ChatListResponse(
            chats=[_summary(entry) for entry in shown],
            next_cursor=encode_cursor(shown[-1].position) if more else None,
        )
        return model_response(page)
