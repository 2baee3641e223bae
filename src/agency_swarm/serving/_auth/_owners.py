"""ChatOwners: the one place a server decides whether a principal may read, write or start a chat, for every route
that names a chat (in its path, as OwnershipGuard reads it, or in its body, as `POST /ag-ui`'s threadId)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from starlette.responses import Response

from ..._base._redact import secret_free_logger
from ..._threads._chat_index import ChatIndex
from .._bodies import error_response, error_status
from ._principal import Principal

logger = secret_free_logger("agency_swarm.serving")

OWNER_CACHE_SIZE = 65_536
NOT_FOUND = "No chat of that id."


def not_found() -> Response:
    """The answer for another principal's chat, the same as for a chat that does not exist."""
    return error_response(404, "not_found", NOT_FOUND)


class ChatOwners:
    """The rules: a chat is its owner's only. Starting a turn with a new message claims an unowned chat for the
    caller (and sets its title and activity; a later message moves its activity); a chat stored before it had an
    owner is an admin's only. An admin reads every chat but writes only its own and unowned ones.

    Owners never change (`_chat_index`), so each owner read is kept in a bounded cache. `clock` gives seconds since
    the epoch."""

    def __init__(self, index: ChatIndex, clock: Callable[[], float]) -> None:
        self.index, self.clock = index, clock
        self._owners: OrderedDict[str, str] = OrderedDict()

    async def refusal(
        self, chat_id: str, principal: Principal, *, reading: bool = False, claiming: bool = False,
        title: str | None = None,
    ) -> Response | None:
        """None when `principal` may go on; else the answer to give: 404 (`not_found`), or what a route answers
        when the index's store fails (503). `claiming`: the request starts a turn with a new message (`title`:
        what that message gives a new chat); `reading`: it only reads."""
        try:
            if claiming:
                allowed = await self.claim(chat_id, principal, title)
            else:
                allowed = await self.may(chat_id, principal, reading=reading)
        except Exception as exc:  # the index's store failed: as a route would answer
            status, detail = error_status(exc)
            logger.error("Chat %r: checking its owner failed (%s)", chat_id, type(exc).__name__, exc_info=exc)
            return error_response(status, detail.type, detail.message)
        return None if allowed else not_found()

    async def may(self, chat_id: str, principal: Principal, *, reading: bool) -> bool:
        """Whether `principal` may read (`reading`) or write a chat without starting a turn on it."""
        if reading and principal.admin:
            return True
        owner = await self._owner(chat_id)
        return owner == principal.name or (owner is None and principal.admin)

    async def claim(self, chat_id: str, principal: Principal, title: str | None) -> bool:
        """Whether `principal` may post a new message to the chat: its own (its activity moves to now), or unowned
        (it becomes the caller's, with `title`)."""
        owner = await self._owner(chat_id)
        if owner is not None and owner != principal.name:
            return False
        if owner is None and not principal.admin and await self.index.chat_stored(chat_id):
            return False  # stored before chats had owners: not for the first principal who names it
        now_us = int(self.clock() * 1_000_000)
        if not await self.index.claim_chat(chat_id, principal.name, title, now_us):
            return False  # another principal claimed it first
        self._remember(chat_id, principal.name)
        return True

    async def forget(self, chat_id: str) -> None:
        """The chat was deleted: out of its owner's list (its owner stays its owner)."""
        await self.index.forget_chat(chat_id)

    async def _owner(self, chat_id: str) -> str | None:
        owner = self._owners.get(chat_id)
        if owner is not None:
            self._owners.move_to_end(chat_id)
            return owner
        owner = await self.index.chat_owner(chat_id)
        if owner is not None:
            self._remember(chat_id, owner)
        return owner

    def _remember(self, chat_id: str, owner: str) -> None:
        self._owners[chat_id] = owner
        self._owners.move_to_end(chat_id)
        if len(self._owners) > OWNER_CACHE_SIZE:
            self._owners.popitem(last=False)
