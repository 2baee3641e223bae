"""AuthSettings: the static tokens and the JWT rules a server authenticates callers by, checked once at start."""

from __future__ import annotations

import ipaddress
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ..._base._errors import ConfigError

MIN_SECRET_BYTES = 32
"""An HS256 secret must be at least as long as the hash (RFC 7518, 3.2)."""
LEGACY_PRINCIPAL = "default"
"""The principal of `create_app(auth_token=...)` / `serve --auth-token-env`: the only one, and an admin."""


@dataclass(frozen=True, kw_only=True)
class AuthSettings:
    """How the server knows who calls. Each request's `Authorization: Bearer <token>` is one of:

    - a static token: `tokens` maps principal names to their tokens (compared through a hash, never logged);
    - a JWT signed with HS256 by `jwt_secret` (at least 32 bytes), or with RS256/ES256 by a key of the JWKS at
      `jwks_url` (https://, or http:// on a loopback address). Its `iss` must be `issuer`, its `aud` hold
      `audience`, `exp` is required; its `sub` is the principal. `alg: none`, an algorithm the key is not for, and
      HS256 over a JWKS key are refused.

    `admin_scope` (a scope in the JWT's `scope`/`scp` claim) or a name in `admins` makes a principal an admin, who
    may read every chat (not write another's). `leeway_seconds` is the clock skew `exp`/`nbf` allow. The JWKS is
    cached `jwks_max_age_seconds`; a token with an unknown key id fetches it again, at most once per
    `jwks_refresh_seconds` (so a flood of made-up key ids costs the identity provider one request per interval).
    Secrets are left out of `repr` and of every error message.
    """

    tokens: Mapping[str, str] = field(default_factory=dict, repr=False)
    jwt_secret: str | None = field(default=None, repr=False)
    jwks_url: str | None = None
    issuer: str | None = None
    audience: str | None = None
    admin_scope: str | None = None
    admins: Collection[str] = ()
    leeway_seconds: float = 30.0
    jwks_refresh_seconds: float = 30.0
    jwks_max_age_seconds: float = 600.0

    @property
    def uses_jwt(self) -> bool:
        return self.jwt_secret is not None or self.jwks_url is not None

    def check(self) -> None:
        """ConfigError naming the first setting that is wrong (never its value when it is a secret)."""
        if not isinstance(self.tokens, Mapping):
            raise ConfigError("AuthSettings.tokens must map principal names to their tokens: {'alice': token}.")
        for name, token in self.tokens.items():
            _check_name(name, "a principal name in AuthSettings.tokens")
            if not isinstance(token, str) or not token.strip():
                raise ConfigError(f"The token of principal {name!r} must be a non-empty str.")
        if len(set(self.tokens.values())) != len(self.tokens):
            raise ConfigError("Two principals in AuthSettings.tokens have the same token; give each its own.")
        if isinstance(self.admins, str):
            raise ConfigError("AuthSettings.admins must be a collection of principal names, not one str.")
        for name in self.admins:
            _check_name(name, "a name in AuthSettings.admins")
        if not self.tokens and not self.uses_jwt:
            raise ConfigError("AuthSettings needs tokens, a jwt_secret or a jwks_url.")
        if self.uses_jwt:
            self._check_jwt()
        for name in ("leeway_seconds", "jwks_refresh_seconds", "jwks_max_age_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
                raise ConfigError(f"AuthSettings.{name} must be a number of seconds >= 0, got {value!r}.")
        if self.admin_scope is not None:
            _check_name(self.admin_scope, "AuthSettings.admin_scope")

    def _check_jwt(self) -> None:
        secret = self.jwt_secret
        if secret is not None and (not isinstance(secret, str) or len(secret.encode()) < MIN_SECRET_BYTES):
            raise ConfigError(f"The JWT secret must be a str of at least {MIN_SECRET_BYTES} bytes (HS256).")
        if self.jwks_url is not None:
            check_jwks_url(self.jwks_url)
        for name in ("issuer", "audience"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(
                    f"JWTs are checked for their issuer and audience: set AuthSettings.{name} (--jwt-{name})."
                )


def _check_name(name: object, what: str) -> None:
    if not isinstance(name, str) or not name.strip() or not name.isprintable():
        raise ConfigError(f"{what} must be a non-empty printable str.")


def check_jwks_url(url: object) -> None:
    """https://, or http:// to a loopback address (a local identity provider, tests)."""
    if not isinstance(url, str):
        raise ConfigError("jwks_url must be a str like 'https://issuer.example/.well-known/jwks.json'.")
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return
    if parts.scheme == "http" and parts.hostname and is_loopback(parts.hostname):
        return
    raise ConfigError("jwks_url must be an https:// URL (http:// only on a loopback address).")


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address) is this machine only: localhost, 127.0.0.0/8, ::1."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def legacy_settings(token: str) -> AuthSettings:
    """One shared bearer token as AuthSettings: its principal `default` owns the chats and reads the chats stored
    before chats had owners."""
    return AuthSettings(tokens={LEGACY_PRINCIPAL: token}, admins=(LEGACY_PRINCIPAL,))
