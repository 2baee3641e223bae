"""The HTTP request a line of log or a turn belongs to (a context variable the serving layer sets per request)."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(slots=True)
class RequestNote:
    """What is known of the request being handled: its id, its caller (with authentication on)."""

    request_id: str
    principal: str | None = None
    store_error_counted: bool = False
    """A turn of this request already counted its store failure (the response's 503 is the same one)."""


REQUEST: ContextVar[RequestNote | None] = ContextVar("agency_swarm_request", default=None)
