"""Stored attachments as a model takes them: references resolved into the data the API expects, ids the model
names them by (shown next to each one to agents that can pass them on), and the parts a thread holds by id."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from typing import Any

from ._incoming import ATTACHMENT, ATTACHMENT_TYPES

Item = dict[str, Any]
Base64Of = Callable[[str], "str | None"]
"""The base64 text of the bytes stored under a sha256 digest; None when they are missing."""

ID_PREFIX = "att_"
_DIGEST = re.compile(r"[0-9a-f]{64}")
_SOURCE_KEYS = ("image_url", "file_url", "file_id", "file_data")


def holds_attachments(item: Item) -> bool:
    """Is `item` a message with an image or file part (by reference, URL, file id or data)?"""
    content = item.get("content")
    if type(content) is not list or "role" not in item:
        return False
    return any(type(part) is dict and part.get("type") in ATTACHMENT_TYPES for part in content)


def any_attachments(items: Iterable[Item]) -> bool:
    return any(holds_attachments(item) for item in items)


def attachment_parts(item: Item) -> list[Item]:
    if not holds_attachments(item):
        return []
    return [part for part in item["content"] if type(part) is dict and part.get("type") in ATTACHMENT_TYPES]


def attachment_id(part: Item) -> str:
    """The id a model names an attachment by: from its bytes' digest, or its URL or file id when it has no bytes
    here. The same image has the same id wherever it appears."""
    ref = part.get(ATTACHMENT)
    if isinstance(ref, dict) and isinstance(ref.get("sha256"), str):
        return ID_PREFIX + str(ref["sha256"])[:12]
    source = next((str(part[key]) for key in _SOURCE_KEYS if part.get(key) is not None), "")
    return ID_PREFIX + hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def digests(items: Iterable[Item]) -> set[str]:
    """The sha256 digests the items' parts refer to."""
    found: set[str] = set()
    for item in items:
        for part in attachment_parts(item):
            ref = part.get(ATTACHMENT)
            digest = ref.get("sha256") if isinstance(ref, dict) else None
            if isinstance(digest, str) and _DIGEST.fullmatch(digest):
                found.add(digest)
    return found


def marker(part: Item) -> Item:
    """The text part shown just before an attachment to an agent that can pass it on: its id and what it is."""
    ref = part.get(ATTACHMENT)
    what = ref.get("media_type") if isinstance(ref, dict) else None
    name = part.get("filename")
    label = ", ".join(str(bit) for bit in (name, what) if bit) or ("image" if part["type"] == "input_image" else "file")
    return {"type": "input_text", "text": f"[attachment {attachment_id(part)}: {label}]"}


def resolved_part(part: Item, base64_of: Base64Of) -> Item:
    """A stored part as the model API takes it: the reference replaced by the data URL (or base64) it stood for."""
    ref = part.get(ATTACHMENT)
    if not isinstance(ref, dict):
        return part
    encoded = base64_of(str(ref.get("sha256")))
    if encoded is None:
        return {"type": "input_text", "text": f"[attachment {attachment_id(part)} is missing from the store]"}
    encoding = str(ref.get("encoding") or "")
    resolved = {key: value for key, value in part.items() if key != ATTACHMENT}
    resolved["image_url" if part["type"] == "input_image" else "file_data"] = (
        f"{encoding},{encoded}" if encoding else encoded
    )
    return resolved


def model_item(item: Item, base64_of: Base64Of, markers: bool) -> Item:
    """`item` as the model reads it: itself when it holds no attachment, else a copy whose references are resolved
    (each one after its marker, with `markers`)."""
    if not holds_attachments(item):
        return item
    parts: list[Any] = []
    for part in item["content"]:
        if type(part) is dict and part.get("type") in ATTACHMENT_TYPES:
            if markers:
                parts.append(marker(part))
            parts.append(resolved_part(part, base64_of))
        else:
            parts.append(part)
    return {**item, "content": parts}


def by_id(items: Iterable[Item]) -> dict[str, Item]:
    """{attachment id: its part as stored} of every attachment in `items`, the latest one for an id seen twice."""
    return {attachment_id(part): part for item in items for part in attachment_parts(item)}
