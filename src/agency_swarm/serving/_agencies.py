"""Several agencies in one app (`create_app({"support": build_a, "sales": build_b}, store=...)`): each agency's own
app mounted under `/<name>`, its own store or a view of a shared one, and one OpenAPI document showing them all."""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from fastapi import FastAPI, Response
from fastapi.openapi.utils import get_openapi

from .._base._errors import ConfigError
from .._threads._namespaced import namespaced_stores
from .._threads._store import ThreadStore
from ._bodies import HealthResponse, error_response
from ._cors import add_cors
from ._text import model_response

NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
RESERVED = frozenset({"chats", "healthz", "openapi.json", "docs", "ui", "ag-ui", "metrics"})
SINGLE_AGENCY_ONLY = {
    "ag_ui": "AG-UI (POST /ag-ui)", "a2a": "A2A (one Agent Card per server)", "ui": "the web chat page (/ui)",
    "durable": "durable mode (DBOS runs one queue runner per process)",
}


def several_agencies(
    factories: Mapping[str, Any], options: dict[str, Any], *, build: Callable[..., FastAPI],
    open_store: Callable[[str], ThreadStore], finish: Callable[[FastAPI], None],
) -> FastAPI:
    """The app of `factories` ({name: factory}), each built by `build` (create_app) with `options` (create_app's
    keyword arguments): its routes under `/<name>`, `/healthz` for them all, CORS (`cors_origins`) in front."""
    names = checked_names(factories)
    refuse_single_only(options)
    stores = _stores(options["store"], names, open_store)
    children = {name: build(factories[name], **{**options, "store": stores[name], "cors_origins": ()})
                for name in names}
    app = FastAPI(
        title="agency_swarm", summary=f"Chats with the agencies {', '.join(names)}, each under /<name>.",
        docs_url=None, redoc_url=None, redirect_slashes=False, lifespan=_lifespan(children),
    )
    app.state.agencies = children
    finish(app)
    _add_health(app, children)
    for name, child in children.items():
        app.mount(f"/{name}", child)
    app.openapi = lambda: _openapi(app, children)  # type: ignore[method-assign]
    add_cors(app, options.get("cors_origins") or ())
    return app


def checked_names(factories: Mapping[str, Any], hint: str = "") -> list[str]:
    """The agencies' names, each a path prefix (ConfigError otherwise, with `hint` on how to name one)."""
    if not factories:
        raise ConfigError("create_app needs at least one agency: {name: factory}.")
    for name in factories:
        if not isinstance(name, str) or not NAME.fullmatch(name) or name in RESERVED:
            raise ConfigError(
                f"Agency name {name!r} is not a path prefix: 1 to 40 of a-z, 0-9, '_' and '-', starting with a letter "
                f"or digit, and not one of {sorted(RESERVED)}{hint}."
            )
    return list(factories)


def refuse_single_only(options: Mapping[str, Any]) -> None:
    """ConfigError for an option that cannot serve several agencies yet, saying what to do instead."""
    for option, what in SINGLE_AGENCY_ONLY.items():
        if options.get(option):
            raise ConfigError(
                f"{what} serves one agency per app, not several: serve the agency that needs it in an app of its "
                f"own (create_app(factory, {option}=...), or agency-swarm serve with one file), or leave {option} out."
            )


def _stores(store: object, names: list[str], open_store: Callable[[str], ThreadStore]) -> dict[str, ThreadStore | str]:
    """Each agency's store: its own (`store` a mapping {name: store or URL}), else its view of the shared one."""
    if isinstance(store, Mapping):
        if set(store) != set(names):
            raise ConfigError(f"store: give one store for each agency ({', '.join(names)}), or one for them all.")
        return dict(store)
    shared = open_store(store) if isinstance(store, str) else store
    if not isinstance(shared, ThreadStore):
        raise ConfigError("The store must be a ThreadStore or a URL like 'postgresql://user@host:5432/db'.")
    return dict(namespaced_stores(shared, names))


def _lifespan(children: Mapping[str, FastAPI]) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """Every agency's app starts with this one (mounted apps get no lifespan of their own) and stops with it."""

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            for child in children.values():
                await stack.enter_async_context(child.router.lifespan_context(child))
            yield

    return lifespan


def _add_health(app: FastAPI, children: Mapping[str, FastAPI]) -> None:
    @app.get("/healthz", response_model=HealthResponse, tags=["server"], operation_id="healthz")
    async def healthz() -> Response:
        """Every agency's store reads and writes (each also answers at /<name>/healthz). No authentication."""
        for name, child in children.items():
            problem = await child.state.health.problem()
            if problem is not None:
                return error_response(503, "store_unavailable", f"{name}: {problem}")
        return model_response(HealthResponse(status="ok"))

    app.head("/healthz", include_in_schema=False)(healthz)


def _openapi(app: FastAPI, children: Mapping[str, FastAPI]) -> dict[str, Any]:
    """This app's document with every agency's paths under its prefix, their operation ids prefixed `<name>_`."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    spec = get_openapi(title=app.title, version=app.version, summary=app.summary, routes=app.routes)
    components: dict[str, dict[str, Any]] = spec.setdefault("components", {})
    for name, child in children.items():
        document = child.openapi()
        for path, operations in document.get("paths", {}).items():
            spec["paths"][f"/{name}{path}"] = _prefixed(copy.deepcopy(operations), name)
        for kind, entries in document.get("components", {}).items():
            components.setdefault(kind, {}).update(entries)  # one set of options: the same models in every agency
    app.openapi_schema = spec
    return spec


def _prefixed(node: Any, name: str) -> Any:
    """Operation ids (and the links that name them) prefixed with the agency's name; tags with it too."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "operationId" and isinstance(value, str):
                node[key] = f"{name}_{value}"
            elif key == "tags" and isinstance(value, list):
                node[key] = [f"{name}: {tag}" for tag in value]
            else:
                _prefixed(value, name)
    elif isinstance(node, list):
        for item in node:
            _prefixed(item, name)
    return node
