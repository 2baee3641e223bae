"""The request guard: bearer auth and the size limit before any body is read, then the body's text and media type."""

from __future__ import annotations

import hmac

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._bodies import error_response
from ._media import NOT_JSON, as_json_request
from ._text import text_problems

PUBLIC_PATHS = frozenset({"/healthz", "/openapi.json"})


class RequestGuard:
    """Bearer auth (constant-time compare), the request size limit, UTF-8 text and JSON bodies, as plain ASGI around
    the app."""

    def __init__(self, app: ASGIApp, *, auth_token: str | None, max_body_bytes: int) -> None:
        self.app = app
        self._token = auth_token.encode() if auth_token is not None else None
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {key.lower(): value for key, value in scope["headers"]}
        if self._token is not None and scope["path"] not in PUBLIC_PATHS and not self._authorized(headers):
            await error_response(401, "unauthorized", "Unauthorized.")(scope, receive, send)
            return
        declared = headers.get(b"content-length")
        if declared is not None and not declared.isdigit():
            await error_response(400, "bad_request", "Content-Length is not a number.")(scope, receive, send)
            return
        body = await self._read_body(headers, receive)
        if body is None:
            message = f"The request body is over {self.max_body_bytes} bytes."
            await error_response(413, "request_too_large", message)(scope, receive, send)
            return
        problems = text_problems(body)
        if problems:  # refused before any route runs: nothing is stored that no response could encode
            where = ".".join(str(part) for part in problems[0]["loc"])
            message = f"{where}: the request's text must be valid UTF-8; see details."
            await error_response(422, "invalid_request", message, details=problems)(scope, receive, send)
            return
        if scope["method"] == "POST" and scope["path"].startswith("/chats/"):  # their bodies are JSON, whatever
            json_scope = as_json_request(scope, headers, body)  # the client declared (curl -d: form-urlencoded)
            if json_scope is None:
                await error_response(415, "unsupported_media_type", NOT_JSON)(scope, receive, send)
                return
            scope = json_scope
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: the client's disconnect

        await self.app(scope, replay, send)

    def _authorized(self, headers: dict[bytes, bytes]) -> bool:
        scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
        expected = self._token or b""
        # compare_digest on every request, even a malformed one, so timing says nothing about the token
        matches = hmac.compare_digest(token.strip(), expected)
        return matches and scheme.lower() == b"bearer"

    async def _read_body(self, headers: dict[bytes, bytes], receive: Receive) -> bytes | None:
        """The whole body, or None when it is over the limit (by Content-Length, or counted as it arrives)."""
        declared = headers.get(b"content-length")
        if declared is not None and int(declared) > self.max_body_bytes:
            return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)
