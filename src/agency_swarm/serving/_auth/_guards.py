"""The ASGI guards: AuthGuard (who calls; 401 before the body is read) and OwnershipGuard (whose chat it is, by the
rules of `_owners.ChatOwners`; 404 for every route of another principal's chat, before the route runs)."""

from __future__ import annotations

import json

import anyio.to_thread
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..._base._errors import InvalidChatId
from ..._base._redact import secret_free_logger
from ..._telemetry._request import REQUEST
from ..._threads._chat_index import title_of
from ..._threads._manager import check_chat_id
from .._bodies import error_response
from .._guard import PUBLIC_PATHS, replaying
from ._jwt import Authenticator, AuthUnavailable, Unauthorized
from ._owners import ChatOwners
from ._principal import ANONYMOUS, PRINCIPAL_KEY, Principal

logger = secret_free_logger("agency_swarm.serving")

CREATING = frozenset({"messages", "messages:stream"})
"""A POST to /chats/{id}/<one of these> may start a chat; every other chat route needs one that exists."""
READING = frozenset({"GET", "HEAD"})
INLINE_PARSE_BYTES = 16 * 1024


def route_path(scope: Scope) -> str:
    """The path the app routes on: without the prefix it is mounted at (`root_path`)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


class AuthGuard:
    """Puts the caller's Principal in the scope (`PRINCIPAL_KEY`): ANONYMOUS without an authenticator, else the
    principal of the bearer token, or 401 (503 when the identity provider's keys cannot be had) before anything
    else runs. /healthz, /openapi.json (and the A2A Agent Card, when served) need no token."""

    def __init__(
        self, app: ASGIApp, *, authenticator: Authenticator | None, public_paths: frozenset[str] = PUBLIC_PATHS
    ) -> None:
        self.app, self.authenticator, self.public_paths = app, authenticator, public_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or route_path(scope) in self.public_paths:
            await self.app(scope, receive, send)
            return
        principal = ANONYMOUS
        if self.authenticator is not None:
            header = next((value for key, value in scope["headers"] if key.lower() == b"authorization"), None)
            try:
                principal = await self.authenticator.principal(header)
            except Unauthorized as refused:
                await error_response(401, "unauthorized", str(refused))(scope, receive, send)
                return
            except AuthUnavailable as unavailable:
                await error_response(503, "auth_unavailable", str(unavailable))(scope, receive, send)
                return
        if principal is not ANONYMOUS:
            note = REQUEST.get()
            if note is not None:  # the request's log lines and span name their caller
                note.principal = principal.name
        await self.app({**scope, PRINCIPAL_KEY: principal}, receive, send)


class OwnershipGuard:
    """Every route under /chats/{chat_id} runs only as `ChatOwners` allows: another principal gets the same 404 as
    for a chat that does not exist, before the route runs. A POST of a message claims the chat (its title from the
    message); GET and HEAD read; every other method writes. A deleted chat is marked so in the index once its
    DELETE answered 204."""

    def __init__(self, app: ASGIApp, *, owners: ChatOwners) -> None:
        self.app, self.owners = app, owners

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        segments = route_path(scope).split("/") if scope["type"] == "http" else []
        if len(segments) < 3 or segments[1] != "chats" or not _valid(segments[2]):
            await self.app(scope, receive, send)  # not a chat's route (or the lifespan); an invalid id: the route's 400
            return
        chat_id, rest = segments[2], "/".join(segments[3:])
        principal: Principal = scope[PRINCIPAL_KEY]
        title = None
        claiming = scope["method"] == "POST" and rest in CREATING
        if claiming:
            body, receive = await _read_body(receive)
            title = await _title(body)
        refusal = await self.owners.refusal(
            chat_id, principal, reading=scope["method"] in READING, claiming=claiming, title=title
        )
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        if scope["method"] == "DELETE" and not rest:
            send = self._forget_when_deleted(chat_id, send)
        await self.app(scope, receive, send)

    def _forget_when_deleted(self, chat_id: str, send: Send) -> Send:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 204:
                try:
                    await self.owners.forget(chat_id)
                except Exception as exc:  # the chat is gone; only its entry in the owner's list stays
                    logger.error("Chat %r: deleted, but its list entry stays (%s)", chat_id, type(exc).__name__)
            await send(message)

        return sending


def _valid(chat_id: str) -> bool:
    try:
        check_chat_id(chat_id)
    except InvalidChatId:
        return False
    return True


async def _read_body(receive: Receive) -> tuple[bytes, Receive]:
    """The request's whole body (the request guard already holds it, and hands it on as one message), and a
    `receive` that gives it again."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    return body, replaying(body, receive)


def _message_title(body: bytes) -> str | None:
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return title_of(value.get("message")) if isinstance(value, dict) else None


async def _title(body: bytes) -> str | None:
    """The title the message in a POST's body gives a new chat (a large body is parsed off the event loop)."""
    if len(body) <= INLINE_PARSE_BYTES:
        return _message_title(body)
    return await anyio.to_thread.run_sync(_message_title, body)
