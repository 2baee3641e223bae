"""Files attached to a message on the command line (`run --attach PATH`, `/attach PATH` in the chat): each one an
image part (its bytes say it is an image) or a file part, checked against the agency's attachment limits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._attachments._media import IMAGE_TYPES, AttachmentLimits, sniff
from .._attachments._parts import file_part, image_part
from .._base._errors import AttachmentError

ATTACH_COMMAND = "/attach"


def attachment(path: str | Path, limits: AttachmentLimits) -> dict[str, Any]:
    """The content part for the file at `path`: an input_image when its bytes are an image, else an input_file.
    AttachmentError (one line, no traceback to show) for a path that is no file, or a file the agency does not take."""
    where = Path(path).expanduser()
    if where.is_dir():
        raise AttachmentError(f"{where} is a directory; attach a file.", problem="no_such_file")
    try:
        with where.open("rb") as opened:
            head = opened.read(16)
    except FileNotFoundError:
        raise AttachmentError(f"no file at {where}; check the path.", problem="no_such_file") from None
    except OSError as error:
        raise AttachmentError(f"cannot read {where}: {error.strerror or error}.", problem="no_such_file") from None
    image = sniff(head) in IMAGE_TYPES
    part = image_part(where, max_bytes=limits.max_part_bytes) if image else file_part(
        where, max_bytes=limits.max_part_bytes
    )
    media_type = str(part.get("image_url") or part.get("file_data") or "").removeprefix("data:").split(";")[0]
    if limits.media_types is not None and media_type not in limits.media_types:
        raise AttachmentError(f"{where.name} is {media_type}, which this agency does not take; allowed: "
                              f"{', '.join(sorted(limits.media_types))}.", problem="unsupported_type")
    return part


def with_attachments(text: str, parts: list[dict[str, Any]]) -> Any:
    """The message to send (`str | list[TResponseInputItem]`): the text alone, or one user message of the text and
    the parts."""
    if not parts:
        return text
    content: list[dict[str, Any]] = [{"type": "input_text", "text": text}] if text else []
    return [{"role": "user", "content": [*content, *parts]}]


def describe(path: str | Path, part: dict[str, Any]) -> str:
    kind = "image" if part["type"] == "input_image" else "file"
    return f"Attached {kind} {Path(path).name}; it goes with your next message."
