"""Running the app: settings shared with uvicorn's worker processes through the environment, and `serve`."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
from dataclasses import dataclass, field
from pathlib import Path as FilePath
from typing import Any

from fastapi import FastAPI

from .._agency._agency import Agency
from .._base._errors import ConfigError, StoreError
from .._base._extras import MissingExtra, install_hint, require_extra
from .._base._redact import secret_free_logger
from .._threads._sql_store import POSTGRES_SCHEMES, SQLITE_SCHEMES, redact_url
from .._threads._store import MemoryThreadStore, ThreadStore
from ._agencies import checked_names, refuse_single_only
from ._app import DEFAULT_MAX_BODY_BYTES, AgencyFactory, create_app, open_store, seconds
from ._auth._serve_options import ENV_AUTH, AuthOptions, check_exposure, import_schema
from ._cors import cors_origins
from ._health import StoreHealth
from ._logs import log_config
from ._observe import check_observability, metrics_directory
from ._sse import SSE_WRITE_TIMEOUT_SECONDS

logger = secret_free_logger("agency_swarm.serving")

ENV_FACTORY = "AGENCY_SWARM_SERVE_FACTORY"
ENV_CONFIG = "AGENCY_SWARM_SERVE_CONFIG"
ENV_STORE = "AGENCY_SWARM_SERVE_STORE"
ENV_AUTH_TOKEN_ENV = "AGENCY_SWARM_SERVE_AUTH_TOKEN_ENV"
ENV_MAX_BODY_BYTES = "AGENCY_SWARM_SERVE_MAX_BODY_BYTES"
ENV_MODELS = "AGENCY_SWARM_SERVE_MODELS"
ENV_TOOLKITS = "AGENCY_SWARM_SERVE_TOOLKITS"
ENV_DURABLE = "AGENCY_SWARM_SERVE_DURABLE"
ENV_DURABLE_QUEUE = "AGENCY_SWARM_SERVE_DURABLE_QUEUE"
ENV_STREAM_WRITE_TIMEOUT = "AGENCY_SWARM_SERVE_STREAM_WRITE_TIMEOUT"
ENV_A2A = "AGENCY_SWARM_SERVE_A2A"
ENV_AG_UI = "AGENCY_SWARM_SERVE_AG_UI"
ENV_UI = "AGENCY_SWARM_SERVE_UI"
ENV_CONTEXT_SCHEMA = "AGENCY_SWARM_SERVE_CONTEXT_SCHEMA"
ENV_ADDITIONAL_INSTRUCTIONS = "AGENCY_SWARM_SERVE_ADDITIONAL_INSTRUCTIONS"
ENV_METRICS = "AGENCY_SWARM_SERVE_METRICS"
ENV_AGENCIES = "AGENCY_SWARM_SERVE_AGENCIES"
ENV_CORS_ORIGINS = "AGENCY_SWARM_SERVE_CORS_ORIGINS"
_ENV_NAMES = (
    ENV_FACTORY, ENV_CONFIG, ENV_STORE, ENV_AUTH_TOKEN_ENV, ENV_MAX_BODY_BYTES, ENV_MODELS, ENV_TOOLKITS, ENV_DURABLE,
    ENV_DURABLE_QUEUE, ENV_STREAM_WRITE_TIMEOUT, ENV_A2A, ENV_AG_UI, ENV_AUTH, ENV_CONTEXT_SCHEMA,
    ENV_ADDITIONAL_INSTRUCTIONS, ENV_UI, ENV_METRICS, ENV_AGENCIES, ENV_CORS_ORIGINS,
)


@dataclass(kw_only=True)
class ServeSettings:
    """What `agency-swarm serve` passes to each worker process (through environment variables)."""

    config: str | None = None
    """An agency file (YAML/JSON) for `Agency.from_config`."""
    factory: str | None = None
    """Or `module:function` or `FILE.py:function`, a function store -> Agency (a module is looked for in the current
    directory first, as `--models` and `--toolkits` do)."""
    store: str | None = None
    """A store URL (postgresql://..., sqlite:///...) or `memory`; None: the agency file's `store:` (memory when it has
    none, and with `factory`)."""
    auth_token_env: str | None = None
    """The NAME of the environment variable holding the bearer token (the token itself never goes on a command
    line, where other users of the machine could read it)."""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    models: str | None = None
    """With `config`: `FILE.py:NAME` or `module:NAME` giving the agents' models (as `agency-swarm run --models`)."""
    toolkits: str | None = None
    """With `config`: `FILE.py:NAME` or `module:NAME` giving the toolkits the file names (as `--toolkits`)."""
    durable: bool = False
    """Turns as DBOS workflows on PostgreSQL (`create_app(durable=True)`); each worker takes a free slot id."""
    durable_queue: str | None = None
    """With `durable`: the agency's queue (None: the queue named after the agency's chart)."""
    stream_write_timeout: float = SSE_WRITE_TIMEOUT_SECONDS
    """Seconds an event stream's reader may take nothing before it is dropped (`create_app(stream_write_timeout=)`)."""
    a2a: bool = False
    """Also serve the agency as an A2A agent (`create_app(a2a=True)`)."""
    ag_ui: bool = False
    """Also serve `POST /ag-ui` for AG-UI clients (`create_app(ag_ui=True)`, the [ag-ui] extra)."""
    ui: bool = False
    """Also serve the web chat page at /ui (`create_app(ui=True)`)."""
    auth: AuthOptions = field(default_factory=AuthOptions)
    """Principals: static tokens per principal, JWTs (secret or JWKS), admins; `--insecure` (`create_app(auth=)`)."""
    context_schema: str | None = None
    """`module:Model`, the pydantic model a request's `context` must match (`create_app(context_schema=)`)."""
    allow_additional_instructions: bool = False
    """Requests may add to the entry agent's instructions (a prompt-injection surface)."""
    metrics: bool = False
    """Serve `GET /metrics` for Prometheus, summed over the workers (`create_app(metrics=True)`)."""
    agencies: tuple[tuple[str, str], ...] = ()
    """Several agency files as (name, file): each agency served under /<name> (`create_app({name: factory})`)."""
    cors_origins: tuple[str, ...] = ()
    """Browser origins allowed to call the server (CORS; `create_app(cors_origins=)`); none by default."""

    def check(self) -> None:
        if (self.config is not None) + (self.factory is not None) + bool(self.agencies) != 1:
            raise ConfigError(
                "Serve either an agency file (agency.yaml) or --factory module:function (or FILE.py:function), not "
                "both (several agency files: serve a.yaml b.yaml, each under /<stem>)."
            )
        self._check_agencies()
        if self.factory is not None and (self.models is not None or self.toolkits is not None):
            raise ConfigError("--models and --toolkits go with an agency file; a --factory builds its own agents.")
        scheme = (self.store or "memory").partition("://")[0].lower()
        if self.store not in (None, "memory") and (
            "://" not in self.store or scheme not in SQLITE_SCHEMES + POSTGRES_SCHEMES
        ):
            raise ConfigError(
                f"--store {redact_url(self.store)!r} is not a store: use postgresql://user@host:5432/db, "
                "sqlite:///chats.db or memory."
            )
        if self.factory is not None and not _looks_like_a_factory(self.factory):
            raise ConfigError(f"--factory {self.factory!r}: write module:function or FILE.py:function.")
        if self.config is not None and not FilePath(self.config).is_file():
            raise ConfigError(f"Agency file {self.config!r} does not exist (or is not a file).")
        if self.auth_token_env is not None and not os.environ.get(self.auth_token_env, "").strip():
            raise ConfigError(
                f"--auth-token-env names {self.auth_token_env!r}, but that environment variable is empty or unset; "
                "export the token in it first."
            )
        if isinstance(self.max_body_bytes, bool) or not isinstance(self.max_body_bytes, int) or self.max_body_bytes < 1:
            raise ConfigError(f"max_body_bytes must be an int >= 1, got {self.max_body_bytes!r}.")
        seconds("--stream-write-timeout", self.stream_write_timeout)
        if self.durable_queue is not None and not self.durable:
            raise ConfigError("--durable-queue names the queue of durable mode: add --durable.")
        self._check_access()

    def _check_agencies(self) -> None:
        cors_origins(self.cors_origins)
        if not self.agencies:
            return
        names = [name for name, _ in self.agencies]
        if len(set(names)) != len(names):
            raise ConfigError(f"Two agency files share a name in {names}: name them apart with --agency NAME=FILE.")
        checked_names(dict(self.agencies), hint=" (name it: --agency NAME=FILE)")
        refuse_single_only({"ag_ui": self.ag_ui, "a2a": self.a2a, "ui": self.ui, "durable": self.durable})
        for _, path in self.agencies:
            if not FilePath(path).is_file():
                raise ConfigError(f"Agency file {path!r} does not exist (or is not a file).")

    def _check_access(self) -> None:
        if self.auth_token_env is not None and self.auth.configured:
            raise ConfigError(
                "--auth-token-env is the one-token form: with --auth-tokens-env or the JWT flags, put that token in "
                "--auth-tokens-env under a principal's name."
            )
        self.auth.settings()  # the variables it names are set and hold what they must
        if self.context_schema is not None:
            import_schema(self.context_schema)

    def durable_options(self) -> dict[str, Any] | bool:
        """`create_app`'s `durable`: False, True, or the queue's name."""
        if self.durable and self.durable_queue is not None:
            return {"queue_name": self.durable_queue}
        return self.durable

    def to_env(self) -> dict[str, str]:
        env = {ENV_STORE: self.store or "", ENV_MAX_BODY_BYTES: str(self.max_body_bytes)}  # "": the file's store
        env[ENV_STREAM_WRITE_TIMEOUT] = repr(float(self.stream_write_timeout))
        if self.durable:
            env[ENV_DURABLE] = "1"
        if self.a2a:
            env[ENV_A2A] = "1"
        if self.ag_ui:
            env[ENV_AG_UI] = "1"
        if self.ui:
            env[ENV_UI] = "1"
        if self.durable_queue is not None:
            env[ENV_DURABLE_QUEUE] = self.durable_queue
        if self.config is not None:
            env[ENV_CONFIG] = str(FilePath(self.config).resolve())
        if self.agencies:
            env[ENV_AGENCIES] = json.dumps([[name, str(FilePath(path).resolve())] for name, path in self.agencies])
        if self.cors_origins:
            env[ENV_CORS_ORIGINS] = " ".join(self.cors_origins)
        if self.factory is not None:
            env[ENV_FACTORY] = _absolute_file(self.factory)
        optional = {
            ENV_AUTH_TOKEN_ENV: self.auth_token_env, ENV_MODELS: self.models, ENV_TOOLKITS: self.toolkits,
            ENV_CONTEXT_SCHEMA: self.context_schema,
            ENV_ADDITIONAL_INSTRUCTIONS: "1" if self.allow_additional_instructions else None,
            ENV_METRICS: "1" if self.metrics else None,
        }
        env.update({name: value for name, value in optional.items() if value is not None})
        env.update(self.auth.to_env())
        return env

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> ServeSettings:
        env = dict(os.environ) if environ is None else environ
        size = env.get(ENV_MAX_BODY_BYTES, str(DEFAULT_MAX_BODY_BYTES))
        if not size.isdigit():
            raise ConfigError(f"{ENV_MAX_BODY_BYTES} must be a whole number of bytes, got {size!r}.")
        if ENV_STORE not in env:
            raise ConfigError(f"{ENV_STORE} is not set; start the server with `agency-swarm serve`.")
        return cls(
            config=env.get(ENV_CONFIG), factory=env.get(ENV_FACTORY), store=env[ENV_STORE] or None,
            auth_token_env=env.get(ENV_AUTH_TOKEN_ENV), max_body_bytes=int(size), models=env.get(ENV_MODELS),
            toolkits=env.get(ENV_TOOLKITS), durable=env.get(ENV_DURABLE) == "1", a2a=env.get(ENV_A2A) == "1",
            durable_queue=env.get(ENV_DURABLE_QUEUE), ag_ui=env.get(ENV_AG_UI) == "1",
            ui=env.get(ENV_UI) == "1",
            stream_write_timeout=_float_env(env, ENV_STREAM_WRITE_TIMEOUT, SSE_WRITE_TIMEOUT_SECONDS),
            auth=AuthOptions.from_env(env), context_schema=env.get(ENV_CONTEXT_SCHEMA),
            allow_additional_instructions=env.get(ENV_ADDITIONAL_INSTRUCTIONS) == "1",
            metrics=env.get(ENV_METRICS) == "1",
            agencies=tuple((str(name), str(path)) for name, path in json.loads(env.get(ENV_AGENCIES) or "[]")),
            cors_origins=tuple(env.get(ENV_CORS_ORIGINS, "").split()),
        )

    def agency_factory(self) -> AgencyFactory:
        if self.factory is not None:
            return _import_factory(self.factory)
        return self._file_factory(str(self.config))

    def agency_factories(self) -> AgencyFactory | dict[str, AgencyFactory]:
        """What `create_app` takes: one factory, or {name: factory} for several agency files."""
        if self.agencies:
            return {name: self._file_factory(path) for name, path in self.agencies}
        return self.agency_factory()

    def _file_factory(self, config: str) -> AgencyFactory:
        models, toolkits = self.models, self.toolkits

        def from_config(store: ThreadStore) -> Agency:
            from .._config._loader import load_agency
            from .._config._python_object import load_python_object  # the same FILE.py:NAME rules as `agency-swarm run`
            from .._config._source import CLI_ARGUMENTS

            return load_agency(
                Agency, config, thread_store=store,
                models=None if models is None else load_python_object("--models", models),
                toolkits=None if toolkits is None else load_python_object("--toolkits", toolkits),
                arguments=CLI_ARGUMENTS,  # errors name --models / --toolkits, as `serve` was given them
            )

        return from_config

    def auth_token(self) -> str | None:
        return None if self.auth_token_env is None else os.environ.get(self.auth_token_env)

    def thread_store(self) -> ThreadStore | str | dict[str, ThreadStore | str]:
        """What a worker serves on: `store`, else the store the agency file names (built now; for several files,
        each its own), else memory."""
        if self.store is not None:
            return self.store
        if self.agencies:
            from .._config._store_options import config_thread_store

            return {name: config_thread_store(path) or "memory" for name, path in self.agencies}
        if self.config is not None:
            from .._config._store_options import config_thread_store

            return config_thread_store(self.config) or "memory"
        return "memory"

    def store_kind(self) -> tuple[str, str | None]:
        """(kind, URL) of the store the workers will share, without opening it: memory, file, sqlite or sql."""
        if self.store is None and self.config is not None:
            from .._config._store_options import config_store_kind

            return config_store_kind(self.config)
        url = self.store or "memory"
        return ("memory", None) if url == "memory" else ("sql", url)


def _float_env(env: dict[str, str], name: str, default: float) -> float:
    value = env.get(name)
    if value is None:
        return default
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"{name} must be a number of seconds, got {value!r}.") from None


def _looks_like_a_factory(target: str) -> bool:
    location, _, name = target.rpartition(":")
    return bool(location.strip()) and all(part.isidentifier() for part in name.split("."))


def _absolute_file(target: str) -> str:
    """`FILE.py:NAME` with FILE made absolute (worker processes import it too), anything else as it is."""
    location, _, name = target.rpartition(":")
    if location.endswith(".py") or os.sep in location:
        return f"{FilePath(location).resolve()}:{name}"
    return target


def _import_factory(path: str) -> AgencyFactory:
    from .._config._python_object import python_object  # the FILE.py:NAME and module:NAME rules of --models

    target = python_object("--factory", path)
    if not callable(target):
        raise ConfigError(f"--factory {path!r} is not a function store -> Agency.")
    factory: AgencyFactory = target
    return factory


def app_from_env() -> FastAPI:
    """The app of one worker process, from the settings `serve` put in the environment (uvicorn --factory)."""
    settings = ServeSettings.from_env()
    settings.check()
    app = create_app(
        settings.agency_factories(), store=settings.thread_store(), auth_token=settings.auth_token(),
        max_body_bytes=settings.max_body_bytes, durable=settings.durable_options(),
        stream_write_timeout=settings.stream_write_timeout, a2a=settings.a2a, ag_ui=settings.ag_ui,
        ui=settings.ui, auth=settings.auth.settings(),
        context_schema=None if settings.context_schema is None else import_schema(settings.context_schema),
        allow_additional_instructions=settings.allow_additional_instructions, metrics=settings.metrics,
        cors_origins=settings.cors_origins,
    )
    # Everything built so far (modules, openai's thousand pydantic schemas, the agency) lives as long as the
    # process: out of the collector's sight, a full collection takes a few ms instead of ~150 ms (see
    # docs/design/performance.md, W6).
    gc.collect()
    gc.freeze()
    return app


def _shared_between_processes(url: str) -> bool:
    return url.partition("://")[0].lower() in POSTGRES_SCHEMES


def _check_shared_store(settings: ServeSettings, workers: int) -> None:
    """Several workers need one store they all lock turns in: PostgreSQL, from --store or the agency file."""
    kind, url = settings.store_kind()
    if kind == "sql" and url is not None and _shared_between_processes(url):
        return
    needs = f"--workers {workers} needs a store the workers share and lock turns in"
    if settings.store is not None or settings.config is None:
        scheme = settings.store.partition("://")[0] if settings.store and "://" in settings.store else "memory"
        sqlite = " (SQLite cannot lock a turn across processes)" if scheme in SQLITE_SCHEMES else ""
        raise ConfigError(f"{needs}: --store postgresql://user@host:5432/db, not {scheme!r}{sqlite}.")
    named = {"memory": "keeps chats in memory (it has no `store:`)", "file": "is a file store",
             "sqlite": "is SQLite, which cannot lock a turn across processes"}.get(kind, "is not PostgreSQL")
    raise ConfigError(
        f"{needs}, and the agency file's store {named}: pass --store postgresql://user@host:5432/db, or set "
        "`store: {type: sql, url_env: VAR}` in the file with a postgresql:// URL in VAR."
    )


def _describe_store(settings: ServeSettings) -> str:
    kind, url = settings.store_kind()
    where = "--store" if settings.store is not None else ("the agency file's store" if settings.config else "default")
    return f"{redact_url(url)} ({where})" if url is not None else f"{kind} ({where})"


def serve(
    settings: ServeSettings,
    *,
    workers: int = 1,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
    access_log: bool = True,
    log_format: str = "text",
) -> None:
    """Run the app with uvicorn until interrupted; `workers` processes share the store (PostgreSQL for > 1): --store,
    else the store the agency file names, else memory. `log_format="json"`: one JSON object per log line."""
    require_extra("serve", "uvicorn", needed_by="agency-swarm serve")
    settings.check()
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"--workers must be an int >= 1, got {workers!r}.")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError(f"--port must be between 0 and 65535, got {port!r}.")
    authenticated = settings.auth_token_env is not None or settings.auth.configured
    check_exposure(host, authenticated=authenticated, insecure=settings.auth.insecure)
    check_observability(settings.metrics, log_format)
    if workers > 1:
        _check_shared_store(settings, workers)
    factories = settings.agency_factories()  # a bad file or factory fails here, not in every worker
    built = [factory(MemoryThreadStore()) for factory in (factories.values() if isinstance(factories, dict) else
                                                          [factories])]
    agency = built[0]
    if settings.durable:
        _check_durable(settings, agency)
    if settings.ag_ui:
        _check_ag_ui()
    _check_store(settings)
    for name in _ENV_NAMES:  # a setting left from an earlier serve in this process (or the shell) is not ours
        os.environ.pop(name, None)
    os.environ.update(settings.to_env())  # worker processes inherit it
    store = _describe_store(settings)
    logger.info("Serving on %s:%d with %d worker(s), store %s", host, port, workers, store)
    if store.startswith("memory"):  # said, not silent: a restart loses every chat
        logger.warning("Chats are kept in memory and lost when the server stops; --store (or `store:` in the agency "
                       "file) keeps them.")
    from ._nodelay import NoDelayHTTP

    logs = {} if log_format == "text" else {"log_config": log_config(log_format)}
    with metrics_directory(settings.metrics):
        _run_uvicorn(workers, host=host, port=port, log_level=log_level, access_log=access_log, http=NoDelayHTTP,
                     **logs)


STORE_CHECK_TIMEOUT_SECONDS = 15.0
"""How long `serve` waits for the store to answer its check at start (a host that drops packets never refuses)."""


def _check_store(settings: ServeSettings) -> None:
    """The workers' store reads and takes a write (the /healthz check), once, before any worker starts: a store that
    cannot be reached (a database host that does not exist, an SQLite file in a missing directory) is a StoreError
    now, instead of a server that starts and fails every request."""
    store = settings.thread_store()
    for each in store.values() if isinstance(store, dict) else [store]:
        if each == "memory":
            continue
        opened = open_store(each) if isinstance(each, str) else each
        problem = asyncio.run(_store_problem(opened))
        if problem is not None:
            raise StoreError(
                f"The store {_describe_store(settings)} cannot be used: {problem} Check that it is running and "
                "reachable from here (and, for SQLite, that its directory exists); no worker was started."
            )


async def _store_problem(store: ThreadStore) -> str | None:
    try:
        return await asyncio.wait_for(StoreHealth(store).probe(), STORE_CHECK_TIMEOUT_SECONDS)
    except TimeoutError:
        return f"it did not answer within {STORE_CHECK_TIMEOUT_SECONDS:g} s."
    finally:
        with contextlib.suppress(Exception):
            await store.aclose()


def _check_durable(settings: ServeSettings, agency: Agency) -> None:
    """Durable mode needs PostgreSQL and DBOS, and a queue name it can take: said once, before any worker starts,
    with the queue the agency's workers will use."""
    kind, url = settings.store_kind()
    if not (kind == "sql" and url is not None and _shared_between_processes(url)):
        raise ConfigError("--durable keeps its queue in PostgreSQL: give --store postgresql://user@host:5432/db.")
    try:
        from ..durable._queues import AgencyIdentity, checked_queue_name
    except MissingExtra as missing:
        raise ConfigError(str(missing)) from missing
    identity = AgencyIdentity(agency)
    named = settings.durable_queue
    queue = identity.default_queue() if named is None else checked_queue_name(named)
    logger.info("Durable turns on queue %r, the agency's (%s)", queue, identity.described)


def _check_ag_ui() -> None:
    """`--ag-ui` needs the protocol's types: said once, before any worker starts."""
    try:
        import ag_ui.core  # noqa: F401
    except ImportError:
        raise ConfigError(f"--ag-ui needs the protocol's types: {install_hint('ag-ui')}.") from None


def _run_uvicorn(workers: int, **options: Any) -> None:
    """uvicorn until interrupted. A worker that fails to start (its error is in the log) stops the server with
    uvicorn's exit code 3: uvicorn exits so itself with one worker; with several, its supervisor stops the others
    and returns as it does after Ctrl-C, so the code is set here (a process manager restarts a server that failed,
    not one that was stopped)."""
    import uvicorn
    from uvicorn.config import STARTUP_FAILURE
    from uvicorn.supervisors import Multiprocess

    target = "agency_swarm.serving:app_from_env"
    if workers == 1:
        uvicorn.run(target, factory=True, **options)
        return
    config = uvicorn.Config(target, factory=True, workers=workers, **options)
    supervisor = Multiprocess(config, sockets=[config.bind_socket()])
    supervisor.run()
    failed = [process.pid for process in supervisor.processes if process.exitcode == STARTUP_FAILURE]
    if failed:
        logger.error("Worker process %s failed to start (its error is above); the server stops with exit code %d.",
                     failed[0], STARTUP_FAILURE)
        raise SystemExit(STARTUP_FAILURE)
