"""`create_app`: the FastAPI app of one worker process, on the store it opens or is given."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any
from urllib.parse import unquote

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from .._agency._agency import Agency
from .._base._errors import ConfigError, InvalidChatId
from .._base._extras import MissingExtra
from .._threads._manager import check_chat_id
from .._threads._sql_store import SQLThreadStore
from .._threads._store import MemoryThreadStore, ThreadStore
from ._bodies import error_response, failure_response
from ._guard import RequestGuard
from ._health import StoreHealth
from ._routes import add_routes
from ._sse import SSE_WRITE_TIMEOUT_SECONDS, StreamTurns

AgencyFactory = Callable[[ThreadStore], Agency]
"""Builds one worker process's agency on the store it is given: `factory(store) -> Agency(..., thread_store=store)`.
One argument, always: the app owns the store, so every worker process opens its own connections."""

DEFAULT_MAX_BODY_BYTES = 1024 * 1024


def open_store(url: str) -> ThreadStore:
    """A store from a URL: `memory` (one process only), `sqlite:///path.db`, `postgresql://user@host/db`."""
    if not isinstance(url, str) or not url:
        raise ConfigError("The store must be a ThreadStore or a URL like 'postgresql://user@host:5432/db'.")
    if url == "memory":
        return MemoryThreadStore()
    return SQLThreadStore(url)


def create_app(
    agency_factory: AgencyFactory,
    *,
    store: ThreadStore | str,
    auth_token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    durable: bool | Mapping[str, Any] = False,
    stream_write_timeout: float = SSE_WRITE_TIMEOUT_SECONDS,
) -> FastAPI:
    """A FastAPI app serving the agency `agency_factory(store)` builds (once, now).

    `store` is a ThreadStore or a URL (`open_store`); share one PostgreSQL database between worker processes,
    each building its own app. With `auth_token`, every endpoint but /healthz and /openapi.json wants
    `Authorization: Bearer <auth_token>`. Bodies over `max_body_bytes` get 413. The app closes the store when it
    shuts down.

    `durable` (True, or the keyword arguments of `agency_swarm.durable.DurableTurns`): every turn runs as a DBOS
    workflow that any worker finishes, submitted once per Idempotency-Key, background turns and resumable event
    streams too (docs/design/durable.md). Needs PostgreSQL: the store's URL, or `database_url` in the mapping.

    `stream_write_timeout` (seconds): an event stream's reader that takes nothing for this long is dropped (its
    stream ends; the turn goes on, its result stays readable at GET /chats/{id}/threads, and in durable mode its
    events at GET /chats/{id}/turns/{turn_id}/events with Last-Event-ID).
    """
    if auth_token is not None and (not isinstance(auth_token, str) or not auth_token.strip()):
        raise ConfigError("auth_token must be a non-empty str, or None to serve without authentication.")
    if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int) or max_body_bytes < 1:
        raise ConfigError(f"max_body_bytes must be an int >= 1, got {max_body_bytes!r}.")
    streams = StreamTurns(seconds("stream_write_timeout", stream_write_timeout))
    thread_store = open_store(store) if isinstance(store, str) else store
    agency = _built_agency(agency_factory, thread_store)
    turns = _durable_turns(agency, store, durable)
    app = FastAPI(
        title="agency_swarm", summary="Chats with an agency of agents.", docs_url=None, redoc_url=None,
        lifespan=_lifespan(agency, turns, streams),
    )
    app.state.agency = agency
    app.state.store = thread_store
    app.state.health = StoreHealth(thread_store)
    _add_error_handlers(app)
    add_routes(app, agency, app.state.health, streams, protected=auth_token is not None, durable=turns is not None)
    if turns is not None:
        from ._durable import add_durable_routes

        add_durable_routes(app, agency, turns, protected=auth_token is not None, write_timeout=streams.write_timeout)
    app.state.durable = turns
    app.state.streams = streams
    app.add_middleware(RequestGuard, auth_token=auth_token, max_body_bytes=max_body_bytes)
    return app


def _built_agency(agency_factory: AgencyFactory, thread_store: ThreadStore) -> Agency:
    if not callable(agency_factory):
        raise ConfigError(f"agency_factory must be a function store -> Agency, got {type(agency_factory).__name__}.")
    agency = agency_factory(thread_store)
    if not isinstance(agency, Agency):
        raise ConfigError(f"agency_factory must return an Agency, got {type(agency).__name__}.")
    if agency.thread_manager.store is not thread_store:
        raise ConfigError(
            "agency_factory must build the agency on the store it is given: Agency(..., thread_store=store). "
            "Otherwise each worker keeps its own chats."
        )
    return agency


def seconds(name: str, value: object) -> float:
    """`value` as a number of seconds > 0 (finite), else ConfigError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
        raise ConfigError(f"{name} must be a number of seconds > 0, got {value!r}.")
    return float(value)


def _lifespan(
    agency: Agency, turns: Any, streams: StreamTurns
) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """Durable turns start with the app (a failure to launch stops the worker) and stop before the store closes;
    streamed turns whose readers left finish before it closes too."""

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if turns is not None:
            await turns.launch()
        try:
            yield
        finally:
            if turns is not None:
                await turns.aclose()
            await streams.wait()
            await agency.aclose()

    return lifespan


def _durable_turns(agency: Agency, store: ThreadStore | str, durable: bool | Mapping[str, Any]) -> Any:
    """The app's DurableTurns (not launched yet), or None. dbos is imported only here: an optional extra."""
    if durable is False:
        return None
    options = dict(durable) if isinstance(durable, Mapping) else {}
    if durable is not True and not isinstance(durable, Mapping):
        raise ConfigError(f"durable must be True, False or a mapping of DurableTurns options, got {durable!r}.")
    if "database_url" not in options:
        if not isinstance(store, str) or not store.partition("://")[0].lower().startswith("postgres"):
            raise ConfigError(
                "Durable mode keeps its queue in PostgreSQL: serve on a postgresql:// store, or pass "
                "durable={'database_url': 'postgresql://...'}."
            )
        options["database_url"] = store
    try:
        from ..durable import DurableTurns
    except MissingExtra as missing:
        raise ConfigError(str(missing)) from missing
    return DurableTurns(agency, **options)


def _add_error_handlers(app: FastAPI) -> None:
    async def invalid_body(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        details = [
            {"loc": list(error.get("loc", ())), "msg": str(error.get("msg", "")), "type": str(error.get("type", ""))}
            for error in exc.errors()
        ]  # the client's input is not echoed back
        return error_response(422, "invalid_request", "The request body is not valid; see details.", details=details)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        refused = _encoded_separator_in_chat_id(request) if exc.status_code == 404 else None
        if refused is not None:  # /chats/a%2Fb/...: the id's decoded '/' made it match no route
            return failure_response(refused, "")
        kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return error_response(exc.status_code, kind, str(exc.detail), headers=exc.headers)  # a 405's Allow (RFC 9110)

    app.add_exception_handler(RequestValidationError, invalid_body)
    app.add_exception_handler(StarletteHTTPException, http_error)


def _encoded_separator_in_chat_id(request: Request) -> InvalidChatId | None:
    """The 400 a chat route gives a bad id, for a path whose id segment holds a percent-encoded '/' or '\\'
    (`/chats/a%2Fb/messages`): decoded, it splits into segments no route matches, and would be a 404."""
    raw = request.scope.get("raw_path")
    if not isinstance(raw, bytes) or not raw.startswith(b"/chats/"):
        return None
    segment = raw[len(b"/chats/"):].split(b"/", 1)[0]
    if b"%2f" not in segment.lower() and b"%5c" not in segment.lower():
        return None
    try:
        check_chat_id(unquote(segment.decode("ascii", "replace"), errors="replace"))
    except InvalidChatId as refused:
        return refused
    return None
