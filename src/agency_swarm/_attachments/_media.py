"""What attachment bytes are: limits, media types sniffed from magic bytes, data URLs, file ids and URLs checked."""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from .._base._errors import AttachmentError

MiB = 1024 * 1024
DEFAULT_MAX_PART_BYTES = 20 * MiB
DEFAULT_MAX_PARTS = 20
DEFAULT_MAX_MESSAGE_BYTES = 50 * MiB

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""The image types the model APIs take in `input_image`, each recognised by its magic bytes."""
SNIFFED_TYPES = IMAGE_TYPES | {"application/pdf"}
"""Types whose bytes are checked against the type a part declares."""

_FILE_ID = re.compile(r"(?:file|assistant)[-_][A-Za-z0-9_-]{1,200}")
_MEDIA_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")


@dataclass(frozen=True, kw_only=True)
class AttachmentLimits:
    """What a message's images and files may be; anything over a limit is refused (`AttachmentError`), and nothing
    of that message is stored.

    `max_part_bytes`: decoded bytes of one image or file. `max_parts`: images and files in one message.
    `max_message_bytes`: decoded bytes of them all. `media_types`: the types allowed (each one as sniffed from the
    bytes where the type has magic bytes); None allows any type whose bytes match what the part declares.
    """

    max_part_bytes: int = DEFAULT_MAX_PART_BYTES
    max_parts: int = DEFAULT_MAX_PARTS
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    media_types: frozenset[str] | None = None

    def __post_init__(self) -> None:
        for name in ("max_part_bytes", "max_parts", "max_message_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise AttachmentError(f"AttachmentLimits.{name} must be an int >= 1, got {value!r}.",
                                      problem="bad_part")
        if self.media_types is not None:
            if isinstance(self.media_types, str) or not all(isinstance(t, str) for t in self.media_types):
                raise AttachmentError("AttachmentLimits.media_types must be a set of media types like 'image/png', "
                                      "or None.", problem="bad_part")
            object.__setattr__(self, "media_types", frozenset(t.lower() for t in self.media_types))


DEFAULT_LIMITS = AttachmentLimits()


def sniff(data: bytes) -> str | None:
    """The media type the bytes' magic number says (PNG, JPEG, GIF, WebP, PDF); None when it is none of those."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(data) >= 12 and data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return "image/webp"
    if data.startswith(b"%PDF-"):
        return "application/pdf"
    return None


def checked_type(data: bytes, declared: str | None, where: str, limits: AttachmentLimits, *, image: bool) -> str:
    """The media type of `data`: what it declares, once the bytes are seen to match it. Refused when the bytes are
    another known type, when a known type's bytes are missing, or when the type is not allowed."""
    sniffed = sniff(data)
    declared = None if declared is None else declared.lower()
    if declared is not None and declared != sniffed and (sniffed is not None or declared in SNIFFED_TYPES):
        found = f"{sniffed} bytes" if sniffed else f"bytes that are not {declared}"
        raise AttachmentError(f"{where} declares {declared} but holds {found}; send the file's real type.",
                              problem="type_mismatch")
    media_type = declared or sniffed
    if media_type is None:
        raise AttachmentError(f"{where}: cannot tell the file's type from its bytes; give it a name with a known "
                              "extension or a data URL with its media type.", problem="unsupported_type")
    if image and media_type not in IMAGE_TYPES:
        raise AttachmentError(f"{where} is {media_type}, not an image the model takes ({', '.join(sorted(IMAGE_TYPES))}"
                              "); send other files as input_file.", problem="unsupported_type")
    if limits.media_types is not None and media_type not in limits.media_types:
        raise AttachmentError(f"{where} is {media_type}, which this agency does not take; allowed: "
                              f"{', '.join(sorted(limits.media_types))}.", problem="unsupported_type")
    return media_type


def decode_data_url(url: str, where: str, limits: AttachmentLimits) -> tuple[str | None, bytes]:
    """(declared media type or None, bytes) of a `data:` URL; it must be base64."""
    header, comma, payload = url.partition(",")
    if not comma:
        raise AttachmentError(f"{where} is a data URL without a ',' before its data.", problem="not_base64")
    params = header[len("data:"):].split(";")
    if params[-1].strip().lower() != "base64":
        raise AttachmentError(f"{where} is a data URL that is not base64 (write 'data:<type>;base64,<data>').",
                              problem="not_base64")
    media_type = params[0].strip().lower() or None
    if media_type is not None and not _MEDIA_TYPE.fullmatch(media_type):
        raise AttachmentError(f"{where} names no valid media type in its data URL.", problem="bad_part")
    return media_type, decode_base64(payload, where, limits)


def decode_base64(text: str, where: str, limits: AttachmentLimits) -> bytes:
    """The bytes of base64 text, refused when it is not base64 or decodes to more than `max_part_bytes`."""
    size = len(text) // 4 * 3 - text[-2:].count("=")  # what valid base64 of this length decodes to
    if size > limits.max_part_bytes:  # refused before decoding
        raise AttachmentError(f"{where} is {size} bytes, over max_part_bytes={limits.max_part_bytes}.",
                              problem="too_large", size=size, limit=limits.max_part_bytes)
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise AttachmentError(f"{where} is not valid base64.", problem="not_base64") from None
    check_size(len(data), where, limits)
    return data


def check_size(size: int, where: str, limits: AttachmentLimits) -> None:
    if size > limits.max_part_bytes:
        raise AttachmentError(f"{where} is {size} bytes, over max_part_bytes={limits.max_part_bytes}.",
                              problem="too_large", size=size, limit=limits.max_part_bytes)
    if size == 0:
        raise AttachmentError(f"{where} is empty.", problem="bad_part")


def check_file_id(file_id: object, where: str) -> str:
    if not isinstance(file_id, str) or not _FILE_ID.fullmatch(file_id):
        raise AttachmentError(f"{where} has a file_id that is not one the model APIs give out (like 'file-abc123').",
                              problem="bad_file_id")
    return file_id


def check_url(url: object, where: str) -> str:
    if not isinstance(url, str) or not url.lower().startswith(("https://", "http://")) or len(url) > 8192:
        raise AttachmentError(f"{where} needs an http(s) URL (or a base64 data URL for its bytes).", problem="bad_url")
    if any(ch.isspace() or not ch.isprintable() for ch in url):
        raise AttachmentError(f"{where} has a URL with spaces or control characters.", problem="bad_url")
    return url
