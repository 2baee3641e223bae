"""Attachment bytes next to threads: the optional store capability (bytes stored once per store, by sha256, each
chat holding references) and a manager's in-process copy of the bytes its loaded chats refer to."""

from __future__ import annotations

import base64
from collections.abc import Collection, Mapping
from typing import Any, Protocol, runtime_checkable

from .._attachments._incoming import referenced
from .._attachments._media import DEFAULT_LIMITS, AttachmentLimits
from .._attachments._view import digests, model_item
from .._base._errors import AttachmentError
from .._base._redact import secret_free_logger
from ._store import Item, Threads

logger = secret_free_logger(__name__)


@runtime_checkable
class AttachmentStore(Protocol):
    """A ThreadStore that keeps attachment bytes itself (memory, file, SQLite and PostgreSQL stores do).

    - `put_attachments(chat_id, {sha256 hex: bytes})`: stores each blob once per store (a blob already there is not
      written again) and notes that the chat holds it. Called, and finished, before any item referring to it is
      appended: a reference is never stored before its bytes.
    - `load_attachments(chat_id, digests)`: the bytes of those of `digests` the chat holds; a digest it does not hold
      is left out (a chat never reads another chat's attachments by guessing a digest).
    - `delete(chat_id)` also forgets the chat's blobs, and deletes those no other chat holds.

    A store without them (a custom store, the load/save callbacks) gets images and files inline in the items.
    """

    stores_attachments: bool

    async def put_attachments(self, chat_id: str, blobs: Mapping[str, bytes]) -> None: ...

    async def load_attachments(self, chat_id: str, digests: Collection[str]) -> dict[str, bytes]: ...


def keeps_attachments(store: object) -> bool:
    return bool(getattr(store, "stores_attachments", False)) and isinstance(store, AttachmentStore)


class Attachments:
    """A ThreadManager's attachments: the limits its messages are checked against, and the bytes (as base64, once
    per process) of the attachments its loaded chats refer to, which references resolve into at model-call time."""

    def __init__(self, store: object, limits: AttachmentLimits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        self.store: AttachmentStore | None = store if keeps_attachments(store) else None  # type: ignore[assignment]
        self.inline = store is not None and self.store is None
        """The store keeps no bytes of its own: it gets every image and file inline in the items."""
        self._base64: dict[str, str] = {}
        self._holders: dict[str, set[str]] = {}  # digest -> chats in memory that hold it
        self._held: dict[str, set[str]] = {}  # chat -> digests

    def base64_of(self, digest: str) -> str | None:
        return self._base64.get(digest)

    def _add(self, chat_id: str, digest: str, data: bytes | None = None, encoded: str | None = None) -> None:
        if digest not in self._base64:
            self._base64[digest] = encoded if encoded is not None else base64.b64encode(data or b"").decode("ascii")
        self._holders.setdefault(digest, set()).add(chat_id)
        self._held.setdefault(chat_id, set()).add(digest)

    def holds(self, chat_id: str, digest: str) -> bool:
        return digest in self._held.get(chat_id, ())

    async def keep(self, chat_id: str, blobs: Mapping[str, bytes]) -> None:
        """Store a message's bytes (in the store first, when it keeps them) before its items are appended."""
        if not blobs:
            return
        if self.store is not None:
            await self.store.put_attachments(chat_id, blobs)
        for digest, data in blobs.items():
            self._add(chat_id, digest, data)

    async def require(self, chat_id: str, wanted: Collection[str]) -> None:
        """References given as input (a result's items sent again) must be the chat's own: AttachmentError if not."""
        missing = {digest for digest in wanted if not self.holds(chat_id, digest)}
        if missing and self.store is not None:
            for digest, data in (await self.store.load_attachments(chat_id, missing)).items():
                self._add(chat_id, digest, data)
                missing.discard(digest)
        if missing:
            raise AttachmentError(
                f"the message refers to {len(missing)} attachment(s) chat {chat_id!r} does not hold; send the image "
                "or file itself.", problem="unknown_attachment",
            )

    async def loaded(self, chat_id: str, threads: Threads) -> Threads:
        """After a load: inline bytes become references (a store without bytes of its own), and the bytes the
        chat's references need are read once from the store. A blob the store lacks is logged; the model then reads
        a note in its place."""
        if self.inline or self.store is None:
            converted: Threads = {}
            for key, items in threads.items():
                converted[key], blobs = referenced(items)
                for digest, data in blobs.items():
                    self._add(chat_id, digest, data)
            return converted
        wanted = {digest for items in threads.values() for digest in digests(items)}
        missing = {digest for digest in wanted if not self.holds(chat_id, digest)}
        if missing:
            found = await self.store.load_attachments(chat_id, missing)
            for digest, data in found.items():
                self._add(chat_id, digest, data)
            if len(found) < len(missing):
                logger.warning("chat %r: %d attachment(s) its items refer to are missing from the store; the model "
                               "reads a note in their place", chat_id, len(missing) - len(found))
        return threads

    def inlined(self, items: list[Item]) -> list[Item]:
        """Items as a store without bytes of its own keeps them: references resolved into their data."""
        return [model_item(item, self.base64_of, False) for item in items]

    def forget(self, chat_id: str) -> None:
        """The chat left memory (or was deleted): bytes no other chat in memory refers to go too."""
        for digest in self._held.pop(chat_id, ()):
            holders = self._holders.get(digest)
            if holders is not None:
                holders.discard(chat_id)
                if not holders:
                    del self._holders[digest]
                    self._base64.pop(digest, None)

    def stats(self) -> dict[str, Any]:
        return {"blobs": len(self._base64), "chars": sum(len(text) for text in self._base64.values())}
