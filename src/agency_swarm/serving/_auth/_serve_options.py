"""What `agency-swarm serve` takes for authentication and request rules, passed to its workers through one
environment variable (names of the variables holding secrets, never the secrets), and the address check."""

from __future__ import annotations

import importlib
import json
import os
import re
from dataclasses import asdict, dataclass, fields
from typing import Any

from pydantic import BaseModel

from ..._base._errors import ConfigError
from ..._base._redact import secret_free_logger
from ._settings import AuthSettings, is_loopback

logger = secret_free_logger("agency_swarm.serving")

ENV_AUTH = "AGENCY_SWARM_SERVE_AUTH"
_OBJECT_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


@dataclass(kw_only=True)
class AuthOptions:
    """`serve`'s authentication flags. Secrets come from environment variables named here: `tokens_env` holds a
    JSON object {principal: token}, `jwt_secret_env` the HS256 secret. `insecure` lets a server without
    authentication listen on an address other than loopback."""

    tokens_env: str | None = None
    jwt_secret_env: str | None = None
    jwks_url: str | None = None
    issuer: str | None = None
    audience: str | None = None
    admin_scope: str | None = None
    admins: tuple[str, ...] = ()
    insecure: bool = False

    @property
    def configured(self) -> bool:
        return any(value for name, value in asdict(self).items() if name != "insecure")

    def settings(self) -> AuthSettings | None:
        """AuthSettings from the flags and the environment (ConfigError naming the flag or variable at fault)."""
        if not self.configured:
            return None
        settings = AuthSettings(
            tokens=_tokens(self.tokens_env), jwt_secret=_secret(self.jwt_secret_env), jwks_url=self.jwks_url,
            issuer=self.issuer, audience=self.audience, admin_scope=self.admin_scope, admins=self.admins,
        )
        settings.check()
        return settings

    def to_env(self) -> dict[str, str]:
        return {ENV_AUTH: json.dumps(asdict(self))} if self.configured or self.insecure else {}

    @classmethod
    def from_env(cls, env: dict[str, str]) -> AuthOptions:
        text = env.get(ENV_AUTH)
        if text is None:
            return cls()
        try:
            values = json.loads(text)
            known = {field.name for field in fields(cls)}
            options = cls(**{name: value for name, value in values.items() if name in known})
        except (ValueError, TypeError, AttributeError):
            raise ConfigError(f"{ENV_AUTH} is not what `agency-swarm serve` writes; start with it.") from None
        options.admins = tuple(options.admins)
        return options


def _env(name: str, flag: str) -> str:
    value = os.environ.get(name, "")
    if not value.strip():
        raise ConfigError(f"{flag} names {name!r}, but that environment variable is empty or unset; export it first.")
    return value


def _tokens(name: str | None) -> dict[str, str]:
    if name is None:
        return {}
    try:
        tokens = json.loads(_env(name, "--auth-tokens-env"))
    except ValueError:
        tokens = None
    if not isinstance(tokens, dict) or not all(isinstance(value, str) for value in tokens.values()):
        raise ConfigError(
            f"The environment variable {name!r} (--auth-tokens-env) must hold a JSON object "
            '{"principal name": "token", ...}.'
        )
    return tokens


def _secret(name: str | None) -> str | None:
    return None if name is None else _env(name, "--jwt-secret-env")


def check_exposure(host: str, *, authenticated: bool, insecure: bool) -> None:
    """A server without authentication listens on loopback only, unless told `--insecure`."""
    if authenticated or is_loopback(host):
        return
    if not insecure:
        raise ConfigError(
            f"Refusing to serve on {host} without authentication: anyone who reaches it reads and writes every chat. "
            "Configure --auth-token-env, --auth-tokens-env, --jwt-secret-env or --jwks-url, or pass --insecure."
        )
    logger.warning("Serving on %s without authentication (--insecure): every caller is one principal", host)


def import_schema(path: str) -> type[BaseModel]:
    """`module:Name` of a pydantic model (--context-schema), imported."""
    if not _OBJECT_PATH.fullmatch(path):
        raise ConfigError(f"--context-schema {path!r} must look like 'package.module:Model'.")
    module_name, _, attribute = path.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"--context-schema {path!r}: cannot import {module_name!r} ({exc}).") from exc
    for part in attribute.split("."):
        target = getattr(target, part, None)
    if not (isinstance(target, type) and issubclass(target, BaseModel)):
        raise ConfigError(f"--context-schema {path!r} is not a pydantic model (a BaseModel subclass).")
    return target
