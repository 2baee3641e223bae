"""CORS from an explicit allow-list (`create_app(cors_origins=[...])`, `serve --cors-origin URL`): none by default."""

from __future__ import annotations

import re
from collections.abc import Iterable

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

from .._base._errors import ConfigError

ORIGIN = re.compile(r"https?://[^/\s?#*]+")
"""An origin as a browser sends it: scheme and host (with its port), no path, no wildcard."""
ALLOWED_HEADERS = ["Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID"]
EXPOSED_HEADERS = ["turn-id", "location", "retry-after"]
PREFLIGHT_MAX_AGE_SECONDS = 600


def cors_origins(origins: object) -> tuple[str, ...]:
    """The allow-list as given (each `https://host[:port]`), else ConfigError."""
    if isinstance(origins, str) or not isinstance(origins, Iterable):
        raise ConfigError("cors_origins must be a list of origins like ['https://app.example.com'].")
    checked = tuple(origins)
    for origin in checked:
        if not isinstance(origin, str) or not ORIGIN.fullmatch(origin):
            raise ConfigError(
                f"CORS origin {origin!r} is not an origin: write scheme://host[:port] (no path, no '*'), e.g. "
                "https://app.example.com."
            )
    return checked


def add_cors(app: FastAPI, origins: Iterable[str]) -> None:
    """Outermost, so a browser's preflight (OPTIONS, no token) is answered before authentication runs; requests
    from an origin not listed get no `Access-Control-Allow-Origin`, so the browser withholds the response."""
    allowed = cors_origins(origins)
    if allowed:
        app.add_middleware(
            CORSMiddleware, allow_origins=list(allowed), allow_methods=["GET", "HEAD", "POST", "DELETE"],
            allow_headers=ALLOWED_HEADERS, expose_headers=EXPOSED_HEADERS, max_age=PREFLIGHT_MAX_AGE_SECONDS,
        )
