"""The ASGI guards: AuthGuard (who calls; 401 before the body is read) and OwnershipGuard (whose chat it is; 404
for every route of another principal's chat, before the route runs)."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable

import anyio.to_thread
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..._base._errors import InvalidChatId
from ..._base._redact import secret_free_logger
from ..._threads._chat_index import ChatIndex, title_of
from ..._threads._manager import check_chat_id
from .._bodies import error_response, error_status
from .._guard import PUBLIC_PATHS
from ._jwt import Authenticator, AuthUnavailable, Unauthorized
from ._principal import ANONYMOUS, PRINCIPAL_KEY, Principal

logger = secret_free_logger("agency_swarm.serving")

CREATING = frozenset({"messages", "messages:stream"})
"""A POST to /chats/{id}/<one of these> may start a chat; every other chat route needs one that exists."""
READING = frozenset({"GET", "HEAD"})
OWNER_CACHE_SIZE = 65_536
INLINE_PARSE_BYTES = 16 * 1024
NOT_FOUND = "No chat of that id."


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
        await self.app({**scope, PRINCIPAL_KEY: principal}, receive, send)


class OwnershipGuard:
    """Every route under /chats/{chat_id} runs only for the chat's owner: another principal gets the same 404 as
    for a chat that does not exist. A POST of a message claims an unowned chat for the caller (and sets its title
    and activity); a chat stored before it had an owner is an admin's only. An admin reads (GET) every chat but
    writes only its own and unowned ones. A deleted chat is marked so in the index once its DELETE answered 204.

    Owners never change (`_chat_index`), so each owner read is kept in a bounded cache."""

    def __init__(self, app: ASGIApp, *, index: ChatIndex, clock: Callable[[], float]) -> None:
        self.app, self.index, self.clock = app, index, clock
        self._owners: OrderedDict[str, str] = OrderedDict()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        segments = route_path(scope).split("/") if scope["type"] == "http" else []
        if len(segments) < 3 or segments[1] != "chats" or not _valid(segments[2]):
            await self.app(scope, receive, send)  # not a chat's route (or the lifespan); an invalid id: the route's 400
            return
        chat_id, rest = segments[2], "/".join(segments[3:])
        principal: Principal = scope[PRINCIPAL_KEY]
        creating = scope["method"] == "POST" and rest in CREATING
        try:
            if creating:
                body, receive = await _read_body(receive)
                allowed = await self._claim(chat_id, principal, await _title(body))
            else:
                allowed = await self._may(chat_id, principal, scope["method"] in READING)
        except Exception as exc:  # the index's store failed: 503, as a route would answer
            status, detail = error_status(exc)
            logger.error("Chat %r: checking its owner failed (%s)", chat_id, type(exc).__name__, exc_info=exc)
            await error_response(status, detail.type, detail.message)(scope, receive, send)
            return
        if not allowed:
            await error_response(404, "not_found", NOT_FOUND)(scope, receive, send)
            return
        if scope["method"] == "DELETE" and not rest:
            send = self._forget_when_deleted(chat_id, send)
        await self.app(scope, receive, send)

    async def _owner(self, chat_id: str) -> str | None:
        owner = self._owners.get(chat_id)
        if owner is not None:
            self._owners.move_to_end(chat_id)
            return owner
        owner = await self.index.chat_owner(chat_id)
        if owner is not None:
            self._owners[chat_id] = owner
            if len(self._owners) > OWNER_CACHE_SIZE:
                self._owners.popitem(last=False)
        return owner

    async def _may(self, chat_id: str, principal: Principal, reading: bool) -> bool:
        if reading and principal.admin:
            return True
        owner = await self._owner(chat_id)
        return owner == principal.name or (owner is None and principal.admin)

    async def _claim(self, chat_id: str, principal: Principal, title: str | None) -> bool:
        owner = await self._owner(chat_id)
        if owner is not None and owner != principal.name:
            return False
        if owner is None and not principal.admin and await self.index.chat_stored(chat_id):
            return False  # stored before chats had owners: not for the first principal who names it
        now_us = int(self.clock() * 1_000_000)
        if not await self.index.claim_chat(chat_id, principal.name, title, now_us):
            return False  # another principal claimed it first
        self._owners[chat_id] = principal.name
        return True

    def _forget_when_deleted(self, chat_id: str, send: Send) -> Send:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 204:
                try:
                    await self.index.forget_chat(chat_id)
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
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay


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
