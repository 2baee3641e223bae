"""`create_app`: the FastAPI app of one worker process, on the store it opens or is given."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from .._agency._agency import Agency
from .._base._errors import ConfigError, InvalidChatId
from .._base._extras import MissingExtra, install_hint
from .._threads._manager import check_chat_id
from .._threads._sql_store import SQLThreadStore
from .._threads._store import MemoryThreadStore, ThreadStore
from ._auth._access import Access, access_for
from ._auth._guards import AuthGuard, OwnershipGuard
from ._auth._owners import ChatOwners
from ._auth._settings import AuthSettings
from ._bodies import error_response, failure_response
from ._cancel import add_cancel_route
from ._cors import add_cors, cors_origins
from ._guard import PUBLIC_PATHS, RequestGuard
from ._health import StoreHealth
from ._observe import observe
from ._openapi import show_bearer_scheme
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
    agency_factory: AgencyFactory | Mapping[str, AgencyFactory],
    *,
    store: ThreadStore | str | Mapping[str, ThreadStore | str],
    auth_token: str | None = None,
    auth: AuthSettings | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    durable: bool | Mapping[str, Any] = False,
    stream_write_timeout: float = SSE_WRITE_TIMEOUT_SECONDS,
    context_schema: type[BaseModel] | None = None,
    allow_additional_instructions: bool = False,
    a2a: bool = False,
    ag_ui: bool = False,
    ui: bool = False,
    metrics: bool = False,
    cors_origins: Sequence[str] = (),
) -> FastAPI:
    """A FastAPI app serving the agency `agency_factory(store)` builds (once, now), on `store` (a ThreadStore or a
    URL, `open_store`; worker processes share one PostgreSQL database). Bodies over `max_body_bytes` get 413.

    - `auth` (static tokens, JWTs) or `auth_token` (one principal): every route but /healthz and /openapi.json wants
      a bearer token, and a chat is its first poster's (others get 404 on all its routes).
    - `context_schema`: a request's `context` must match it; it reaches tools as `RequestContext.data`.
      `allow_additional_instructions`: requests may add to the entry agent's instructions (prompt injection).
    - `durable` (True, or `DurableTurns` keyword arguments): every turn is a DBOS workflow (docs/design/durable.md).
    - `stream_write_timeout` (s): an event stream's reader that takes nothing for this long is dropped.
    - `a2a`: the agency as an A2A agent (docs/a2a.md); `ag_ui`: `POST /ag-ui` for AG-UI clients (docs/ag-ui.md).
    - `ui`: the web chat page at /ui (docs/web-chat.md); `metrics`: `GET /metrics` (docs/guides/observability.md).
    - `cors_origins`: browser origins allowed. `{name: factory}` (`{name: store}`): agencies, each under /<name>.
    """
    if isinstance(agency_factory, Mapping):  # one app of several agencies' apps (`_agencies`)
        return _several(agency_factory, dict(locals()))
    streams = _checked_options(ag_ui, ui, max_body_bytes, stream_write_timeout, cors_origins)
    thread_store = _one_store(store)
    access = access_for(
        thread_store, auth_token=auth_token, auth=auth, context_schema=context_schema,
        allow_additional_instructions=allow_additional_instructions,
    )
    agency = _built_agency(agency_factory, thread_store)
    turns = _durable_turns(agency, store, durable)
    service = _a2a_service(agency, thread_store, a2a, access, turns)
    app = FastAPI(
        title="agency_swarm", summary="Chats with an agency of agents.", docs_url=None, redoc_url=None,
        redirect_slashes=False,  # `/chats/%2F` is a bad chat id (400), not a redirect to `/chats`
        lifespan=_lifespan(agency, turns, streams, service),
    )
    app.state.agency, app.state.store, app.state.durable, app.state.streams = agency, thread_store, turns, streams
    app.state.health, app.state.a2a = StoreHealth(thread_store), service
    _assemble(app, access, max_body_bytes, ag_ui=ag_ui, ui=ui, cors=cors_origins)
    return observe(app, metrics=metrics)


def _several(factories: Mapping[str, AgencyFactory], options: dict[str, Any]) -> FastAPI:
    from ._agencies import several_agencies

    options.pop("agency_factory")
    return several_agencies(factories, options, build=create_app, open_store=open_store, finish=_add_error_handlers)


def _assemble(
    app: FastAPI, access: Access, max_body_bytes: int, *, ag_ui: bool, ui: bool, cors: Sequence[str] = ()
) -> None:
    """The error handlers, the routes, and the guards in front of them."""
    _add_error_handlers(app)
    protected, turns, streams = access.authenticator is not None, app.state.durable, app.state.streams
    add_routes(app, app.state.agency, app.state.health, streams, protected=protected, durable=turns is not None)
    if turns is not None:
        from ._durable import add_durable_routes

        add_durable_routes(app, app.state.agency, turns, protected=protected, write_timeout=streams.write_timeout)
    add_cancel_route(app, app.state.agency.cancel if turns is None else turns.cancel, protected=protected)
    _add_ag_ui(app, app.state.agency, streams, turns, access.owners, protected=protected, enabled=ag_ui)
    access.add_routes(app)
    if protected:
        show_bearer_scheme(app)
    app.state.access = access
    service = app.state.a2a
    public = PUBLIC_PATHS if service is None else service.mount(app) | PUBLIC_PATHS
    if ui:
        from ._ui import UI_PUBLIC_PATHS, add_ui_routes

        add_ui_routes(app, app.state.agency)
        public |= UI_PUBLIC_PATHS
    # The last added runs first: who calls (401 before any body is read), then the path, size and body checks,
    # then whose chat it is (404), then the route.
    app.add_middleware(OwnershipGuard, owners=access.owners)
    limits = app.state.agency.thread_manager.attachments.limits  # a form's files are checked as they arrive
    app.add_middleware(RequestGuard, max_body_bytes=max_body_bytes, attachment_limits=limits)
    app.add_middleware(AuthGuard, authenticator=access.authenticator, public_paths=public)
    add_cors(app, cors)  # outermost: a preflight is answered before authentication


def _checked_options(
    ag_ui: bool, ui: bool, max_body_bytes: int, stream_write_timeout: float, cors: Sequence[str]
) -> StreamTurns:
    """The options that need no store checked (ConfigError), and the app's StreamTurns."""
    cors_origins(cors)
    for name, value in (("ag_ui", ag_ui), ("ui", ui)):
        if not isinstance(value, bool):
            raise ConfigError(f"{name} must be True or False, got {type(value).__name__}.")
    if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int) or max_body_bytes < 1:
        raise ConfigError(f"max_body_bytes must be an int >= 1, got {max_body_bytes!r}.")
    return StreamTurns(seconds("stream_write_timeout", stream_write_timeout))


def _add_ag_ui(
    app: FastAPI, agency: Agency, streams: StreamTurns, turns: Any, owners: ChatOwners, *, protected: bool,
    enabled: bool,
) -> None:
    """`POST /ag-ui` when `enabled`. ag_ui (the protocol's types) is imported only here: an optional extra."""
    if not enabled:
        return
    try:
        from ._ag_ui import add_ag_ui_route
    except ImportError as missing:
        if not (missing.name or "").startswith("ag_ui"):
            raise
        raise ConfigError(
            f"The AG-UI endpoint needs the protocol's types: {install_hint('ag-ui')}."
        ) from None
    add_ag_ui_route(app, agency, streams, turns, owners, protected=protected)


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


def _one_store(store: ThreadStore | str | Mapping[str, ThreadStore | str]) -> ThreadStore:
    if isinstance(store, Mapping):
        raise ConfigError("A store per agency ({name: store}) goes with several agencies ({name: factory}).")
    return open_store(store) if isinstance(store, str) else store


def seconds(name: str, value: object) -> float:
    """`value` as a number of seconds > 0 (finite), else ConfigError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
        raise ConfigError(f"{name} must be a number of seconds > 0, got {value!r}.")
    return float(value)


def _lifespan(
    agency: Agency, turns: Any, streams: StreamTurns, service: Any = None
) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """Durable turns start with the app (a failure to launch stops the worker) and stop before the store closes;
    streamed turns whose readers left, and A2A tasks still running, finish before it closes too."""

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if turns is not None:
            await turns.launch()
        try:
            yield
        finally:
            if turns is not None:
                await turns.aclose()
            if service is not None:
                await service.aclose()
            await streams.wait()
            await agency.aclose()

    return lifespan


def _durable_turns(agency: Agency, store: object, durable: bool | Mapping[str, Any]) -> Any:
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


def _a2a_service(agency: Agency, store: ThreadStore, a2a: object, access: Access, turns: Any) -> Any:
    """The app's A2AService, or None. a2a-sdk is imported only here: an optional extra. Its tasks are the owners'
    of their chats (`access.owners`); it says it wants a token when the app does. With the app's DurableTurns
    (`turns`), tasks' turns are durable turns."""
    owners, protected = access.owners, access.authenticator is not None
    if a2a is False:
        return None
    if a2a is not True:
        raise ConfigError(f"a2a must be True or False, got {a2a!r}.")
    from .._remote._protocol import require_a2a

    require_a2a()
    from ._a2a._service import A2AService

    return A2AService(agency, store, owners, protected=protected, turns=turns)


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
    raw, root = request.scope.get("raw_path"), request.scope.get("root_path", "").encode()
    if isinstance(raw, bytes) and root and raw.startswith(root):  # an agency of several, mounted at /<name>
        raw = raw[len(root):]
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
