"""The request guard: the path and the size limit before any body is read, then the body's text and media type (off
the event loop for a large body). Authentication runs before it (`_auth._guards.AuthGuard`)."""

from __future__ import annotations

import json
from urllib.parse import unquote_to_bytes

import anyio
import anyio.to_thread
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._attachments._media import DEFAULT_LIMITS, AttachmentLimits
from .._base._errors import AttachmentError
from ._bodies import ATTACHMENT_STATUS, error_response
from ._health import HEALTH_PROBE_CHAT
from ._media import NOT_JSON, as_json_request
from ._multipart import FormReader, FormRefused, form_boundary
from ._text import text_problems

PUBLIC_PATHS = frozenset({"/healthz", "/openapi.json"})
OFF_LOOP_BYTES = 16 * 1024
"""A body over this size is checked (UTF-8 text, JSON) in a worker thread: the check is linear in the body's size,
and the worst shapes measured take about 0.5 ms at 16 KiB, 170 ms at 1 MiB, which the event loop must not wait for."""
BODY_CHECK_THREADS = 2
"""Large bodies checked at once, per worker process; more wait (without blocking the loop) for a thread."""


class RequestGuard:
    """Ids in the path, the request size limit, UTF-8 text and JSON bodies, as plain ASGI around the app."""

    def __init__(
        self, app: ASGIApp, *, max_body_bytes: int, attachment_limits: AttachmentLimits = DEFAULT_LIMITS
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.attachment_limits = attachment_limits
        self._limiter: anyio.CapacityLimiter | None = None  # made in the loop that uses it

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {key.lower(): value for key, value in scope["headers"]}
        refusal = self._refused_before_body(scope, headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        if _is_message_route(scope):
            try:
                boundary = form_boundary(headers.get(b"content-type"))
            except FormRefused as refused:
                await _form_refusal(refused)(scope, receive, send)
                return
            if boundary is not None:
                await self._form(scope, headers, receive, send, boundary)
                return
        body = await self._read_body(headers, receive)
        if body is None:
            message = f"The request body is over {self.max_body_bytes} bytes."
            await error_response(413, "request_too_large", message)(scope, receive, send)
            return
        if len(body) > OFF_LOOP_BYTES:
            if self._limiter is None:
                self._limiter = anyio.CapacityLimiter(BODY_CHECK_THREADS)
            refusal, scope = await anyio.to_thread.run_sync(checked_body, scope, headers, body, limiter=self._limiter)
        else:
            refusal, scope = checked_body(scope, headers, body)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, replaying(body, receive), send)

    async def _form(
        self, scope: Scope, headers: dict[bytes, bytes], receive: Receive, send: Send, boundary: bytes
    ) -> None:
        """A message sent as multipart/form-data: read as it streams in, refused at the first chunk over a limit
        (nothing is stored then), else handed on as the JSON body it stands for."""
        try:
            form = await self._read_form(headers, receive, boundary)
            if form is None:
                return  # the client left before its body was sent: no one to answer
            if form.size > OFF_LOOP_BYTES:  # the files' base64: linear, off the loop for large ones
                if self._limiter is None:
                    self._limiter = anyio.CapacityLimiter(BODY_CHECK_THREADS)
                body = await anyio.to_thread.run_sync(_json_of, form, limiter=self._limiter)
            else:
                body = _json_of(form)
        except FormRefused as refused:
            await _form_refusal(refused)(scope, receive, send)
            return
        except AttachmentError as error:
            await error_response(ATTACHMENT_STATUS.get(error.problem, 400), error.problem, str(error))(
                scope, receive, send
            )
            return
        del form
        relabelled = [(key, value) for key, value in scope["headers"]
                      if key.lower() not in (b"content-type", b"content-length")]
        relabelled += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await self.app({**scope, "headers": relabelled}, replaying(body, receive), send)

    async def _read_form(self, headers: dict[bytes, bytes], receive: Receive, boundary: bytes) -> FormReader | None:
        declared = headers.get(b"content-length")
        if declared is not None and int(declared) > self.max_body_bytes:
            raise FormRefused(413, "request_too_large", self._too_large)
        form = FormReader(boundary, self.attachment_limits)
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise FormRefused(413, "request_too_large", self._too_large)
            form.feed(chunk)
            if not message.get("more_body", False):
                return form

    @property
    def _too_large(self) -> str:
        return (f"The request body is over {self.max_body_bytes} bytes (the server's max_body_bytes); send less, or "
                "raise the server's limit.")

    def _refused_before_body(self, scope: Scope, headers: dict[bytes, bytes]) -> Response | None:
        declared = headers.get(b"content-length")
        if declared is not None and not declared.isdigit():
            return error_response(400, "bad_request", "Content-Length is not a number.")
        return path_refusal(scope)

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


def path_refusal(scope: Scope) -> Response | None:
    """400 for a path whose percent-decoded bytes are not UTF-8 (the server would decode them to U+FFFD, so `%FF`
    and `%FE` would name the same chat), and for the chat id the health check writes to."""
    raw_path = (scope.get("raw_path") or b"").partition(b"?")[0]  # some servers (httpx's ASGI) keep the query
    raw_segments = raw_path.split(b"/")
    for index, segment in enumerate(raw_segments):
        try:
            unquote_to_bytes(segment).decode("utf-8")
        except UnicodeDecodeError:
            if index > 0 and raw_segments[index - 1] == b"chats":
                return error_response(
                    400, "invalid_chat_id", "The chat id is not UTF-8 once percent-decoded; percent-encode the UTF-8 "
                    "bytes of the id (RFC 3986).",
                )
            return error_response(400, "bad_request", "The request path is not UTF-8 once percent-decoded.")
    segments = _routed(scope).split("/")
    if len(segments) > 2 and segments[1] == "chats" and segments[2] == HEALTH_PROBE_CHAT:
        message = f"chat_id {HEALTH_PROBE_CHAT!r} is reserved for the server's health check; use another id."
        return error_response(400, "invalid_chat_id", message)
    return None


def _routed(scope: Scope) -> str:
    """The path without the prefix the app is mounted at (an agency of several: `/<name>`)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


def checked_body(scope: Scope, headers: dict[bytes, bytes], body: bytes) -> tuple[Response | None, Scope]:
    """The refusal of a body that is not UTF-8 text (422) or not JSON (415), else None and the scope to hand on.
    Linear in the body's size, in time and memory; a large body's check runs in a worker thread."""
    problems = text_problems(body)
    if problems:  # refused before any route runs: nothing is stored that no response could encode
        where = ".".join(str(part) for part in problems[0]["loc"])
        message = f"{where}: the request's text must be valid UTF-8; see details."
        return error_response(422, "invalid_request", message, details=problems), scope
    path = _routed(scope)
    json_body = path.startswith("/chats/") or path == "/ag-ui"
    if scope["method"] == "POST" and json_body:  # their bodies are JSON, whatever the client declared (curl -d:
        json_scope = as_json_request(scope, headers, body)  # form-urlencoded)
        if json_scope is None:
            return error_response(415, "unsupported_media_type", NOT_JSON), scope
        return None, json_scope
    return None, scope


def replaying(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the whole body at once, then what the client sends after it (its disconnect)."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


MESSAGE_ROUTES = ("/messages", "/messages:stream")


def _is_message_route(scope: Scope) -> bool:
    """POST /chats/{chat_id}/messages or /messages:stream: the routes that take a message as a form too."""
    segments = scope["path"].split("/")
    return (scope["method"] == "POST" and len(segments) == 4 and segments[1] == "chats"
            and "/" + segments[3] in MESSAGE_ROUTES)


def _form_refusal(refused: FormRefused) -> Response:
    if refused.details is None:
        return error_response(refused.status, refused.kind, str(refused))
    return error_response(refused.status, refused.kind, str(refused), details=refused.details)


def _json_of(form: FormReader) -> bytes:
    return json.dumps(form.message_body(), ensure_ascii=False, separators=(",", ":")).encode()
