"""A message as it arrives (a str, or the SDK's input items): its parts checked, its bytes split off to be stored
once, content-addressed, and the items a thread stores, which hold a reference in place of the bytes."""

from __future__ import annotations

import hashlib
import mimetypes
import re
from dataclasses import dataclass, field
from typing import Any

from .._base._errors import AttachmentError, ConfigError
from ._media import (
    AttachmentLimits,
    check_file_id,
    check_size,
    check_url,
    checked_type,
    decode_base64,
    decode_data_url,
)

ATTACHMENT = "attachment"
"""The key of a stored part's reference: `{"sha256": ..., "media_type": ..., "size": ..., "encoding": ...}` where
`encoding` is the data URL's header (`"data:image/png;base64"`) or "" for bare base64."""
ATTACHMENT_TYPES = ("input_image", "input_file")
_DATA_KEY = {"input_image": "image_url", "input_file": "file_data"}
_SOURCES = {"input_image": ("image_url", "file_id"), "input_file": ("file_data", "file_id", "file_url")}
_DIGEST = re.compile(r"[0-9a-f]{64}")
MAX_FILENAME_CHARS = 255


@dataclass(frozen=True, slots=True)
class Incoming:
    """A message given as input items: as the caller gave it, and as a thread stores it."""

    original: list[dict[str, Any]]
    """The caller's items, untouched: what input guardrails, hooks and `turn_input` see, as under `Runner`."""
    items: list[dict[str, Any]]
    """The items to store: each image or file given as bytes holds a reference (`ATTACHMENT`) instead."""
    blobs: dict[str, bytes] = field(default_factory=dict)
    """{sha256 hex: bytes} to store before the items (a reference is never stored before its bytes)."""
    references: frozenset[str] = frozenset()
    """Digests of references given as input (a result's items sent again): the chat must hold them already."""

    @property
    def text(self) -> str:
        """The message's text parts (and plain-text contents), one per line: what events show."""
        return message_text(self.items)


def prepare_message(message: object, limits: AttachmentLimits) -> str | Incoming:
    """`message` checked: a str as it is; a list of input items as an `Incoming`. AttachmentError (or ConfigError
    for a list that is not input items) says what is wrong; nothing is stored yet either way."""
    if isinstance(message, str):
        return message
    if not isinstance(message, list):
        raise ConfigError(f"message must be a str or a list of input items (dicts), got {type(message).__name__}.")
    if not message:
        raise ConfigError("message is an empty list; send a str or at least one input item.")
    prepared = _Prepared(limits)
    items = [prepared.item(item, index) for index, item in enumerate(message)]
    return Incoming(message, items, prepared.blobs, frozenset(prepared.references))


class _Prepared:
    """The blobs, references and counts of one message's parts, gathered while its items are checked."""

    def __init__(self, limits: AttachmentLimits) -> None:
        self.limits = limits
        self.blobs: dict[str, bytes] = {}
        self.references: set[str] = set()
        self.parts = 0
        self.size = 0

    def item(self, item: object, index: int) -> dict[str, Any]:
        if not isinstance(item, dict):
            raise ConfigError(f"message item {index} is a {type(item).__name__}; input items are dicts.")
        content = item.get("content")
        if "role" not in item or not isinstance(content, list):
            return item
        parts = [self.part(part, f"message item {index}, part {number}") for number, part in enumerate(content)]
        return {**item, "content": parts}

    def part(self, part: object, where: str) -> Any:
        if not isinstance(part, dict) or part.get("type") not in ATTACHMENT_TYPES:
            return part
        self.parts += 1
        if self.parts > self.limits.max_parts:
            raise AttachmentError(f"the message has more than max_parts={self.limits.max_parts} images and files.",
                                  problem="too_many", size=self.parts, limit=self.limits.max_parts)
        kind = part["type"]
        where = f"{where} ({kind})"
        if ATTACHMENT in part:
            digest = checked_reference(part, where)
            self.references.add(digest)
            self._count(part[ATTACHMENT]["size"], where)
            return part
        given = [key for key in _SOURCES[kind] if part.get(key) is not None]
        if len(given) != 1:
            raise AttachmentError(
                f"{where} has {' and '.join(given) if given else 'none'} of {', '.join(_SOURCES[kind])}; give exactly "
                "one (a URL, the bytes as a data URL, or a file id).", problem="ambiguous" if given else "bad_part",
            )
        source = given[0]
        value = part[source]
        filename = _filename(part, where)
        if source == "file_id":
            check_file_id(value, where)
            return _with_detail(part)
        if source == "file_url" or (source == "image_url" and isinstance(value, str) and not value.startswith("data:")):
            check_url(value, where)
            return _with_detail(part)
        return self._bytes(part, kind, value, filename, where)

    def _bytes(self, part: dict[str, Any], kind: str, value: object, filename: str | None, where: str) -> Any:
        if not isinstance(value, str):
            raise AttachmentError(f"{where}: {_DATA_KEY[kind]} must be a str.", problem="bad_part")
        if value.startswith("data:"):
            declared, data = decode_data_url(value, where, self.limits)
            encoding = value.partition(",")[0]
        else:
            if filename is None:
                raise AttachmentError(f"{where} gives bare base64 file_data without a filename; add `filename` (its "
                                      "extension says the type) or send a data URL.", problem="bad_part")
            declared, data, encoding = mimetypes.guess_type(filename)[0], decode_base64(value, where, self.limits), ""
        check_size(len(data), where, self.limits)
        media_type = checked_type(data, declared, where, self.limits, image=kind == "input_image")
        self._count(len(data), where)
        digest = hashlib.sha256(data).hexdigest()
        self.blobs[digest] = data
        kept = {key: item for key, item in part.items() if key != _DATA_KEY[kind]}
        kept[ATTACHMENT] = {"sha256": digest, "media_type": media_type, "size": len(data), "encoding": encoding}
        return _with_detail(kept)

    def _count(self, size: object, where: str) -> None:
        self.size += size if isinstance(size, int) else 0
        if self.size > self.limits.max_message_bytes:
            raise AttachmentError(
                f"the message's images and files add up to {self.size} bytes (at {where}), over "
                f"max_message_bytes={self.limits.max_message_bytes}.",
                problem="message_too_large", size=self.size, limit=self.limits.max_message_bytes,
            )


def _with_detail(part: dict[str, Any]) -> dict[str, Any]:
    """An input_image always says its detail (the API's default, "auto", when the caller left it out)."""
    if part.get("type") == "input_image" and "detail" not in part:
        return {**part, "detail": "auto"}
    return part


def _filename(part: dict[str, Any], where: str) -> str | None:
    name = part.get("filename")
    if name is None:
        return None
    if not isinstance(name, str) or not name or len(name) > MAX_FILENAME_CHARS or not name.isprintable():
        raise AttachmentError(f"{where}: filename must be a printable str of 1 to {MAX_FILENAME_CHARS} characters.",
                              problem="bad_part")
    return name


def checked_reference(part: dict[str, Any], where: str) -> str:
    """The digest of a stored part's reference, once its shape is seen to be one this package writes."""
    ref = part.get(ATTACHMENT)
    if (
        not isinstance(ref, dict) or not isinstance(ref.get("sha256"), str) or not _DIGEST.fullmatch(ref["sha256"])
        or not isinstance(ref.get("media_type"), str) or type(ref.get("size")) is not int
        or not isinstance(ref.get("encoding"), str) or (ref["encoding"] and not ref["encoding"].startswith("data:"))
        or any(part.get(key) is not None for key in _SOURCES[part["type"]])
    ):
        raise AttachmentError(f"{where} holds an attachment reference this package did not write.",
                              problem="unknown_attachment")
    digest: str = ref["sha256"]
    return digest


def message_text(items: list[dict[str, Any]]) -> str:
    """The text of the items' messages: plain contents and input_text parts, one per line."""
    texts: list[str] = []
    for item in items:
        content = item.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [part["text"] for part in content if isinstance(part, dict)
                      and part.get("type") == "input_text" and isinstance(part.get("text"), str)]
    return "\n".join(texts)


def forwarded(text: str, parts: list[dict[str, Any]]) -> Incoming:
    """A message between agents with attachments the sender passes on: its text, then the parts as stored."""
    item = {"role": "user", "content": [{"type": "input_text", "text": text}, *parts]}
    return Incoming([item], [item])



_UNBOUNDED = AttachmentLimits(max_part_bytes=2**62, max_parts=2**31, max_message_bytes=2**62)


def referenced(items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, bytes]]:
    """Loaded items whose images and files hold their bytes inline (a store that keeps no attachments of its own)
    as references, and the bytes they hold. A part that is not valid stays as it was."""
    blobs: dict[str, bytes] = {}
    out: list[dict[str, Any]] = []
    for item in items:
        content = item.get("content")
        if "role" not in item or type(content) is not list or not any(
            type(part) is dict and part.get("type") in ATTACHMENT_TYPES and ATTACHMENT not in part for part in content
        ):
            out.append(item)
            continue
        prepared = _Prepared(_UNBOUNDED)
        parts: list[Any] = []
        for part in content:
            try:
                parts.append(prepared.part(part, "stored part"))
            except (AttachmentError, ConfigError):
                parts.append(part)
        blobs.update(prepared.blobs)
        out.append({**item, "content": parts})
    return out, blobs
