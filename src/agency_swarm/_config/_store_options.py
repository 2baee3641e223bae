"""The thread store a file describes (memory, file, SQLite or SQL), unless the caller passes one."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from .._base._errors import ConfigError
from ._source import Source

if TYPE_CHECKING:
    from .._threads._store import ThreadStore
    from ._schema import StoreSpec


_STORE_KEYS = {"memory": (), "file": ("dir", "durable"), "sqlite": ("path",), "sql": ("url", "url_env")}


def config_store_kind(path: str | os.PathLike[str]) -> tuple[str, str | None]:
    """The store an agency file names, without opening it: its kind (memory, file, sqlite or sql) and, for sql, its
    URL (from `url:` or `url_env:`). `agency-swarm serve` checks it before starting workers that share it."""
    source, spec = _read_spec(path)
    if spec is None:
        return "memory", None
    kind = _store_kind(source, spec)
    return kind, _sql_url(source, spec) if kind == "sql" else None


def config_thread_store(path: str | os.PathLike[str]) -> ThreadStore | None:
    """The store an agency file names, built (None for memory or no `store:`): what a server worker serves on."""
    source, spec = _read_spec(path)
    store: ThreadStore | None = thread_store_options(source, spec, None, None).get("thread_store")
    return store


def _read_spec(path: str | os.PathLike[str]) -> tuple[Source, StoreSpec | None]:
    from ._parse import read_config
    from ._validate import validate_config

    source, raw = read_config(path)
    return source, validate_config(source, raw).store


def _store_kind(source: Source, spec: StoreSpec) -> str:
    kind = spec.type or ("sql" if spec.url is not None or spec.url_env is not None else None)
    if kind is None:
        raise source.error("set the store's `type:` (memory, file, sqlite or sql) or its `url:`.", ("store",))
    for key in ("dir", "durable", "path", "url", "url_env"):
        if getattr(spec, key) is not None and key not in _STORE_KEYS[kind]:
            allowed = ", ".join(_STORE_KEYS[kind]) or "nothing else"
            raise source.error(f"a {kind} store takes {allowed}, not {key!r}.", ("store", key))
    return kind


def thread_store_options(
    source: Source, spec: StoreSpec | None, thread_store: ThreadStore | None, threads_dir: Any
) -> dict[str, Any]:
    if thread_store is not None or threads_dir is not None:  # the caller's choice beats the file's
        return {"thread_store": thread_store, "threads_dir": threads_dir}
    if spec is None:
        return {}
    kind = _store_kind(source, spec)
    if kind == "memory":
        return {}
    if kind == "file":
        from .._threads._file_store import FileThreadStore

        directory = _required(source, spec.dir, "dir", "type: file")
        return {"thread_store": FileThreadStore(_resolve(source, directory), durable=bool(spec.durable))}
    if kind == "sqlite":
        from .._threads._sql_store import SQLiteThreadStore

        database = _required(source, spec.path, "path", "type: sqlite")
        return {"thread_store": SQLiteThreadStore(_resolve(source, database))}
    return {"thread_store": _sql_store(source, spec)}


def _required(source: Source, value: str | None, key: str, kind: str) -> str:
    if value is None:
        raise source.error(f"a store with {kind} needs `{key}:`.", ("store",))
    return value


def _resolve(source: Source, path: str) -> str:
    """Store paths are relative to the config file's directory (absolute ones are taken as they are)."""
    return os.path.join(source.directory, os.path.expanduser(path))


def _sql_store(source: Source, spec: StoreSpec) -> ThreadStore:
    from .._threads._sql_store import SQLThreadStore

    url = _sql_url(source, spec)
    try:
        return SQLThreadStore(url)
    except ConfigError as error:
        raise source.error(str(error), ("store", "url_env" if spec.url_env else "url")) from error


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _sql_url(source: Source, spec: StoreSpec) -> str:
    from urllib.parse import urlsplit

    from .._threads._sql_store import redact_url

    if (spec.url is None) == (spec.url_env is None):
        raise source.error(
            "a sql store takes one of `url:` or `url_env:` (the name of an environment variable holding the URL).",
            ("store",),
        )
    if spec.url_env is not None:
        if not _ENV_NAME.fullmatch(spec.url_env):  # a URL pasted here holds a password: not printed back
            raise source.error(
                "`url_env:` takes the name of an environment variable (letters, digits and _), not the URL itself.",
                ("store", "url_env"),
            )
        url = os.environ.get(spec.url_env)
        if not url:
            raise source.error(f"the environment variable {spec.url_env} is not set.", ("store", "url_env"))
    else:
        url = spec.url or ""
        try:
            has_password = urlsplit(url).password is not None or "password=" in url.lower()
        except ValueError:
            has_password = False
        if has_password:
            raise source.error(
                f"the store URL {redact_url(url)} holds a password, and config files never hold secrets: put the URL "
                "in an environment variable and write `url_env: ITS_NAME`.",
                ("store", "url"),
            )
        url = _sqlite_url_here(source, url)
    return url


def _sqlite_url_here(source: Source, url: str) -> str:
    """`sqlite:///threads.db` in a config file means next to the config file, not in the working directory."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme.lower().startswith("sqlite") and rest.startswith("/") and not rest.startswith("//"):
        relative = rest[1:]
        if relative and relative != ":memory:" and not os.path.isabs(relative):
            return f"{scheme}:///{os.path.join(source.directory, relative)}"
    return url
