"""SQL store URLs: which database a URL names, and the same URL with its password redacted for errors and logs."""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, unquote, urlsplit

from .._base._errors import ConfigError

SQLITE_SCHEMES = ("sqlite", "sqlite+aiosqlite")
POSTGRES_SCHEMES = ("postgresql", "postgresql+asyncpg", "postgres")
SECRET_QUERY_KEYS = frozenset({"password", "sslpassword"})
REDACTED = "***"


def redact_url(url: str) -> str:
    """The URL with its password (user:PASSWORD@ and ?password=...) replaced by ***; safe for errors and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        scheme = url.partition("://")[0] if "://" in url else ""
        return f"{scheme}://{REDACTED}" if scheme.isidentifier() else REDACTED
    redacted = url
    if parts.password is not None:
        userinfo, _, hostinfo = parts.netloc.rpartition("@")
        netloc = f"{userinfo.partition(':')[0]}:{REDACTED}@{hostinfo}"
        redacted = redacted.replace(parts.netloc, netloc, 1)
    if parts.query:
        pairs = []
        for pair in parts.query.split("&"):
            key, sep, _value = pair.partition("=")
            pairs.append(f"{key}={REDACTED}" if sep and unquote(key).lower() in SECRET_QUERY_KEYS else pair)
        redacted = redacted.replace("?" + parts.query, "?" + "&".join(pairs), 1)
    return redacted


def url_secrets(url: str) -> tuple[str, ...]:
    """Every spelling of the URL's password, to scrub from driver messages that might echo it."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ()
    secrets = []
    if parts.password:
        secrets += [parts.password, unquote(parts.password)]
    for key, value in parse_qsl(parts.query):
        if key.lower() in SECRET_QUERY_KEYS and value:
            secrets.append(value)
    return tuple(sorted(set(secrets), key=len, reverse=True))


def sqlite_path(rest: str, redacted: str) -> str:
    """`sqlite:///rel.db` -> rel.db, `sqlite:////abs.db` -> /abs.db, `sqlite://` or `sqlite:///:memory:` -> memory."""
    if rest in ("", "/:memory:"):
        return ":memory:"
    if not rest.startswith("/"):
        raise ConfigError(
            f"SQLite URL {redacted!r} names a host; use sqlite:///relative/path.db or sqlite:////absolute/path.db."
        )
    if "?" in rest or "#" in rest:
        raise ConfigError(
            f"SQLite URL {redacted!r} has query parameters, which this store does not support; "
            "for a file name with '?' or '#' use SQLiteThreadStore(path)."
        )
    path = rest[1:]
    if not path:
        raise ConfigError(f"SQLite URL {redacted!r} names no file; use sqlite:///relative/path.db.")
    return os.path.abspath(path)
