"""`image_part` and `file_part`: the SDK's `input_image` / `input_file` content parts from a path, bytes or a URL."""

from __future__ import annotations

import base64
import mimetypes
import os
from pathlib import Path
from typing import Any, Literal

from .._base._errors import AttachmentError
from ._media import DEFAULT_MAX_PART_BYTES, AttachmentLimits, check_size, check_url, checked_type

Source = str | os.PathLike[str] | bytes


def image_part(
    source: Source,
    *,
    detail: Literal["auto", "low", "high", "original"] = "auto",
    media_type: str | None = None,
    max_bytes: int = DEFAULT_MAX_PART_BYTES,
) -> dict[str, Any]:
    """An `input_image` part: from a path (read now, its type sniffed from its bytes), from bytes, or from an
    http(s) URL (passed on as it is). `{"type": "input_image", "image_url": ..., "detail": ...}`."""
    if _is_url(source):
        return {"type": "input_image", "image_url": check_url(source, "image URL"), "detail": detail}
    data, where, _ = _read(source, max_bytes)
    kind = checked_type(data, media_type, where, AttachmentLimits(max_part_bytes=max_bytes), image=True)
    return {"type": "input_image", "image_url": _data_url(kind, data), "detail": detail}


def file_part(
    source: Source,
    *,
    filename: str | None = None,
    media_type: str | None = None,
    max_bytes: int = DEFAULT_MAX_PART_BYTES,
) -> dict[str, Any]:
    """An `input_file` part (a PDF, say): from a path (read now), from bytes (give `filename` or `media_type`), or
    from an http(s) URL (passed on as it is). The type comes from `media_type`, else the file name's extension,
    else the bytes; bytes that are not that type are refused. `{"type": "input_file", "file_data": <data URL>,
    "filename": ...}`."""
    if _is_url(source):
        part: dict[str, Any] = {"type": "input_file", "file_url": check_url(source, "file URL")}
        if filename is not None:
            part["filename"] = filename
        return part
    data, where, name = _read(source, max_bytes)
    name = filename or name
    declared = media_type or (mimetypes.guess_type(name)[0] if name else None)
    kind = checked_type(data, declared, where, AttachmentLimits(max_part_bytes=max_bytes), image=False)
    if not name:
        name = "file" + (mimetypes.guess_extension(kind) or "")
    return {"type": "input_file", "file_data": _data_url(kind, data), "filename": name}


def _is_url(source: Source) -> bool:
    return isinstance(source, str) and source.lower().startswith(("http://", "https://"))


def _read(source: Source, max_bytes: int) -> tuple[bytes, str, str | None]:
    """(bytes, how errors name them, the file's name) of a path or of bytes, within `max_bytes`."""
    limits = AttachmentLimits(max_part_bytes=max_bytes)
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
        check_size(len(data), "the bytes given", limits)
        return data, "the bytes given", None
    if not isinstance(source, str | os.PathLike):
        raise AttachmentError(f"expected a path, bytes or an http(s) URL, got {type(source).__name__}.",
                              problem="bad_part")
    path = Path(source)
    where = f"file {path.name!r}"
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise AttachmentError(f"{path} is not a file.", problem="no_such_file")
        check_size(size, where, limits)
        data = path.read_bytes()
    except FileNotFoundError:
        raise AttachmentError(f"no file at {path}; check the path.", problem="no_such_file") from None
    except OSError as error:
        raise AttachmentError(f"cannot read {path}: {error.strerror or error}.", problem="no_such_file") from None
    check_size(len(data), where, limits)
    return data, where, path.name


def _data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"
