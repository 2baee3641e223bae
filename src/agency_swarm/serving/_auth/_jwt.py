"""Authenticating a bearer token: static tokens by hash, JWTs by PyJWT against a secret or a cached JWKS."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import httpx2
import jwt

from ..._base._redact import secret_free_logger
from ._principal import Principal
from ._settings import AuthSettings

logger = secret_free_logger("agency_swarm.serving")

JWKS_ALGORITHMS = frozenset({"RS256", "ES256"})
SECRET_ALGORITHM = "HS256"
JWKS_TIMEOUT_SECONDS = 5.0
MAX_JWKS_BYTES = 256 * 1024
MAX_SUB_CHARS = 255
VERIFIED_CACHE_SIZE = 4096
"""HS256 tokens verified, kept per process with their principal until they expire: a client sends the same token
with every request, and PyJWT takes about as long to check one as a turn's own work on the server."""
_DECODE_OPTIONS: Any = {"require": ["exp", "iss", "aud", "sub"], "enforce_minimum_key_length": True}


class Unauthorized(Exception):
    """401: no token, or one that is not valid. The message says why, never what the token holds."""


class AuthUnavailable(Exception):
    """503: the identity provider's keys could not be fetched, and none are cached."""


_INVALID = "The bearer token is not valid (its signature, algorithm or format)."
_REASONS: list[tuple[type[Exception], str]] = [
    (jwt.ExpiredSignatureError, "The bearer token has expired."),
    (jwt.ImmatureSignatureError, "The bearer token is not valid yet."),
    (jwt.InvalidAudienceError, "The bearer token is not meant for this server (its audience)."),
    (jwt.InvalidIssuerError, "The bearer token comes from an issuer this server does not trust."),
]


class JWKSKeys:
    """The signing keys at a JWKS URL, fetched on first use and again when older than `max_age` or when a token
    names a key id not among them; fetches start at most once per `refresh_seconds` (`clock`: monotonic seconds,
    for tests), and concurrent callers share one. A failed fetch keeps the keys already held."""

    def __init__(
        self, url: str, *, refresh_seconds: float, max_age_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url, self.clock = url, clock
        self._refresh_seconds, self._max_age = refresh_seconds, max_age_seconds
        self._keys: list[jwt.PyJWK] = []
        self._fetched_at: float | None = None
        self._attempted_at: float | None = None
        self._failed = False
        self._fetch: asyncio.Task[list[jwt.PyJWK]] | None = None
        self.fetches = 0

    def _may_fetch(self) -> bool:
        return self._attempted_at is None or self.clock() - self._attempted_at >= self._refresh_seconds

    def _find(self, kid: str | None, algorithm: str) -> jwt.PyJWK | None:
        matching = [key for key in self._keys if key.algorithm_name == algorithm and (kid is None or key.key_id == kid)]
        return matching[0] if len(matching) == 1 or (kid is not None and matching) else None

    async def key(self, kid: str | None, algorithm: str) -> jwt.PyJWK:
        if self._fetch is not None and not self._fetch.done():
            await self._refresh()
        stale = self._fetched_at is None or self.clock() - self._fetched_at >= self._max_age
        if stale and self._may_fetch():
            await self._refresh()
        key = self._find(kid, algorithm)
        if key is None and self._may_fetch():
            await self._refresh()
            key = self._find(kid, algorithm)
        if key is None and not self._keys and self._failed:
            raise AuthUnavailable("The identity provider's signing keys could not be fetched; try again later.")
        if key is None:
            raise Unauthorized("The bearer token is signed with a key this server does not know.")
        return key

    async def _refresh(self) -> None:
        if self._fetch is None or self._fetch.done():
            self._attempted_at = self.clock()
            self._fetch = asyncio.ensure_future(self._fetched())
        task = self._fetch
        try:
            keys = await asyncio.shield(task)  # a caller that leaves does not cancel the others' fetch
        except Exception as error:
            self._failed = True
            logger.warning("Could not fetch the JWKS at %s (%s); keeping %d key(s)", self.url,
                           type(error).__name__, len(self._keys))
            return
        if task is self._fetch and self._fetch.done():
            self._keys, self._fetched_at, self._failed = keys, self.clock(), False

    async def _fetched(self) -> list[jwt.PyJWK]:
        self.fetches += 1
        async with httpx2.AsyncClient(timeout=JWKS_TIMEOUT_SECONDS, follow_redirects=False) as client:
            response = await client.get(self.url, headers={"accept": "application/json"})
        if response.status_code != 200 or len(response.content) > MAX_JWKS_BYTES:
            raise ValueError(f"the JWKS answered {response.status_code} with {len(response.content)} bytes")
        found = response.json().get("keys")
        if not isinstance(found, list):
            raise ValueError("the JWKS has no `keys` list")
        keys = []
        for data in found:
            try:
                key = jwt.PyJWK(data)
            except (jwt.PyJWKError, jwt.InvalidKeyError, TypeError, ValueError, AttributeError):
                continue  # a key type this server does not take (or a malformed one): not one it verifies with
            if key.algorithm_name in JWKS_ALGORITHMS and data.get("use", "sig") == "sig":
                keys.append(key)
        return keys


def _scopes(claims: dict[str, Any]) -> frozenset[str]:
    found = claims.get("scope", claims.get("scp", ""))
    if isinstance(found, str):
        return frozenset(found.split())
    if isinstance(found, list):
        return frozenset(scope for scope in found if isinstance(scope, str))
    return frozenset()


class Authenticator:
    """The principal of an `Authorization` header's value, per AuthSettings (checked before)."""

    def __init__(
        self, settings: AuthSettings, clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._static = {hashlib.sha256(token.encode()).digest(): name for name, token in settings.tokens.items()}
        self._settings, self._wall_clock = settings, wall_clock
        self._verified: OrderedDict[str, tuple[Principal, float]] = OrderedDict()
        """HS256 token -> (its principal, the time it stops being valid: `exp` plus the leeway)."""
        self._admins = frozenset(settings.admins)
        self._algorithms = {SECRET_ALGORITHM} if settings.jwt_secret is not None else set()
        self.jwks: JWKSKeys | None = None
        if settings.jwks_url is not None:
            self._algorithms |= JWKS_ALGORITHMS
            self.jwks = JWKSKeys(
                settings.jwks_url, refresh_seconds=settings.jwks_refresh_seconds,
                max_age_seconds=settings.jwks_max_age_seconds, clock=clock,
            )

    async def principal(self, authorization: bytes | None) -> Principal:
        scheme, _, raw = (authorization or b"").partition(b" ")
        token = raw.strip()
        if scheme.lower() != b"bearer" or not token:
            raise Unauthorized("Unauthorized.")
        if self._static:  # looked up by hash; a server of JWTs only has nothing to hash for
            name = self._static.get(hashlib.sha256(token).digest())
            if name is not None:
                return Principal(name, admin=name in self._admins)
        if not self._algorithms or token.count(b".") != 2:
            raise Unauthorized("Unauthorized.")
        text = token.decode("latin-1")
        verified = self._verified.get(text)
        if verified is not None:
            if self._wall_clock() < verified[1]:
                self._verified.move_to_end(text)
                return verified[0]
            del self._verified[text]  # expired: checked again, and refused, by PyJWT
        return await self._from_jwt(text)

    def _remember(self, token: str, principal: Principal) -> None:
        """Keep a verified HS256 token (the secret never changes in a process) until its `exp` plus the leeway."""
        expires = principal.claims.get("exp")
        if isinstance(expires, int | float) and not isinstance(expires, bool):
            self._verified[token] = (principal, float(expires) + self._settings.leeway_seconds)
            if len(self._verified) > VERIFIED_CACHE_SIZE:
                self._verified.popitem(last=False)

    async def _from_jwt(self, token: str) -> Principal:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            raise Unauthorized(_INVALID) from None
        algorithm = header.get("alg")
        if algorithm not in self._algorithms:  # `none` and every algorithm this server has no key for
            raise Unauthorized("The bearer token's algorithm is not one this server accepts.")
        key: Any = self._settings.jwt_secret
        if algorithm != SECRET_ALGORITHM:
            assert self.jwks is not None
            key = await self.jwks.key(header.get("kid"), algorithm)
        claims = self._decoded(token, key, algorithm)
        sub = claims["sub"]
        if not isinstance(sub, str) or not sub.strip() or len(sub) > MAX_SUB_CHARS or not sub.isprintable():
            raise Unauthorized("The bearer token's `sub` is not a principal name (1 to 255 printable characters).")
        scopes = _scopes(claims)
        admin = sub in self._admins or (self._settings.admin_scope is not None and self._settings.admin_scope in scopes)
        principal = Principal(sub, scopes=scopes, claims=claims, admin=admin)
        if algorithm == SECRET_ALGORITHM:
            self._remember(token, principal)
        return principal

    def _decoded(self, token: str, key: Any, algorithm: str) -> dict[str, Any]:
        settings = self._settings
        try:
            claims: dict[str, Any] = jwt.decode(
                token, key, algorithms=[algorithm], audience=settings.audience, issuer=settings.issuer,
                leeway=settings.leeway_seconds, options=_DECODE_OPTIONS,
            )
        except jwt.MissingRequiredClaimError as missing:
            raise Unauthorized(f"The bearer token has no `{missing.claim}` claim.") from None
        except jwt.InvalidTokenError as invalid:
            reason = next((text for kind, text in _REASONS if isinstance(invalid, kind)), _INVALID)
            raise Unauthorized(reason) from None
        return claims
