"""Helpers for the authentication tests: keys and JWTs made in the test, a JWKS served over real HTTP on 127.0.0.1,
and every chat route of an app, read from its own OpenAPI document, as a request to send."""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

ISSUER = "https://id.test/"
AUDIENCE = "agency-api"
SECRET = "s" * 16 + uuid.uuid4().hex  # 48 bytes, as HS256 wants at least 32


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def claims(sub: str, **overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    values: dict[str, Any] = {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600}
    values.update(overrides)
    return {name: value for name, value in values.items() if value is not None}


def hs256(sub: str, secret: str = SECRET, **overrides: Any) -> str:
    return jwt.encode(claims(sub, **overrides), secret, algorithm="HS256")


def signed(key: Any, kid: str | None, sub: str, algorithm: str = "RS256", **overrides: Any) -> str:
    headers = {} if kid is None else {"kid": kid}
    return jwt.encode(claims(sub, **overrides), key, algorithm=algorithm, headers=headers)


def unsigned(sub: str, **overrides: Any) -> str:
    """A JWT with `alg: none` and no signature, as an attacker writes it."""

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims(sub, **overrides))}."


def public_jwk(key: Any, kid: str, **extra: Any) -> dict[str, Any]:
    algorithm = jwt.algorithms.RSAAlgorithm if isinstance(key, rsa.RSAPrivateKey) else jwt.algorithms.ECAlgorithm
    data: dict[str, Any] = json.loads(algorithm.to_jwk(key.public_key()))
    return {**data, "kid": kid, "use": "sig", **extra}


@dataclass
class JWKSServer:
    """A JWKS at http://127.0.0.1:PORT/jwks.json, served by a real HTTP server in a thread. `keys` may change at any
    time (a rotation); `fetches` counts the requests; `status` other than 200 makes it fail."""

    keys: list[dict[str, Any]] = field(default_factory=list)
    fetches: int = 0
    status: int = 200

    def __post_init__(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.fetches += 1
                body = json.dumps({"keys": owner.keys}).encode()
                self.send_response(owner.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/jwks.json"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


# -- every route of a chat, from the app's own OpenAPI document --------------------------------------------------------


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # with {chat_id} and maybe {turn_id}
    operation: str
    body: dict[str, Any] | None

    @property
    def creates(self) -> bool:
        """A POST of a message: on an id nobody holds, it starts a chat (so its answer there differs)."""
        return self.method == "POST" and self.path.rsplit("/", 1)[-1] in ("messages", "messages:stream")

    def url(self, chat_id: str, turn_id: str = "no-such-turn") -> str:
        return self.path.replace("{chat_id}", quote(chat_id, safe="")).replace("{turn_id}", quote(turn_id, safe=""))


def _example(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any] | None:
    """A body with the schema's required fields only (strings), or None for a body that may be left out."""
    if "$ref" in schema:
        schema = components[schema["$ref"].rsplit("/", 1)[-1]]
    options = schema.get("anyOf", [schema])
    if any(option.get("type") == "null" for option in options):
        return None
    target = next(option for option in options if "$ref" in option or option.get("type") == "object")
    if "$ref" in target:
        target = components[target["$ref"].rsplit("/", 1)[-1]]
    return {name: "hello" for name in target.get("required", [])}


def chat_routes(spec: dict[str, Any]) -> Iterator[Route]:
    """Every operation whose path holds a chat id, with a minimal valid body: a route added later is covered too."""
    components = spec.get("components", {}).get("schemas", {})
    for path, methods in spec["paths"].items():
        if "{chat_id}" not in path:
            continue
        for method, operation in methods.items():
            content = operation.get("requestBody", {}).get("content", {}).get("application/json")
            body = None if content is None else _example(content["schema"], components)
            yield Route(method.upper(), path, operation["operationId"], body)
