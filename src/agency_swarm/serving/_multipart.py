"""A message as multipart/form-data: the JSON body's fields as text fields (`message`, `recipient_agent`, ...) and
files as file parts, read as the body streams in, within the agency's attachment limits. Each file becomes an
input_image (an image) or input_file part of one user message, its type sniffed from its bytes (never from its
name or the part's Content-Type). The form becomes the JSON body the route takes, so both run the same checks."""

from __future__ import annotations

import base64
import json
import mimetypes
from dataclasses import dataclass, field
from typing import Any

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from .._attachments._incoming import MAX_FILENAME_CHARS
from .._attachments._media import IMAGE_TYPES, SNIFFED_TYPES, AttachmentLimits, sniff
from .._base._errors import AttachmentError

FORM_TYPE = b"multipart/form-data"
TEXT_FIELDS = ("message", "recipient_agent", "context", "additional_instructions", "background")
"""The JSON body's fields, as a form's text fields: `context` holds JSON text, `background` true or false."""
SNIFF_BYTES = 12
"""Enough of a file's first bytes to tell every type `sniff` knows (WebP's is the longest)."""
MAX_PART_HEADERS = 8
MAX_HEADER_BYTES = 8 * 1024
TAKEN = ", ".join(sorted(SNIFFED_TYPES))


class FormRefused(Exception):
    """A form refused before anything of it reached a route: the status, the error's type, and what to do."""

    def __init__(self, status: int, kind: str, message: str, details: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.details = status, kind, details


def invalid(message: str, name: str | None = None, problem: str = "invalid_form") -> FormRefused:
    details = None if name is None else [{"loc": ["body", name], "msg": message, "type": problem}]
    return FormRefused(422, "invalid_request", message, details)


def form_boundary(content_type: bytes | None) -> bytes | None:
    """The boundary of a multipart/form-data Content-Type; None for any other type. FormRefused (422) for a form
    without one."""
    if content_type is None:
        return None
    kind, options = parse_options_header(content_type)
    if kind != FORM_TYPE:
        return None
    boundary = options.get(b"boundary", b"")
    if not boundary or len(boundary) > 200:
        raise invalid("The multipart/form-data Content-Type names no valid boundary (1 to 200 characters).")
    return boundary


@dataclass
class _Part:
    """One part of the form being read: a text field, or a file (`filename` is set)."""

    name: str
    filename: str | None
    declared: str | None
    number: int = 0
    """Its place among the form's files, from 1."""
    data: bytearray = field(default_factory=bytearray)
    media_type: str | None = None


class FormReader:
    """Reads a form fed chunk by chunk (`feed`), refusing it at the first chunk that breaks a limit: a file over
    `max_part_bytes`, more than `max_parts` files, files over `max_message_bytes` in all (AttachmentError, 413), a
    type the server does not take (AttachmentError, 415), a form that is not one (FormRefused, 422). It holds at most
    the files' bytes within the limits, and the text fields (the caller bounds the body's size)."""

    def __init__(self, boundary: bytes, limits: AttachmentLimits) -> None:
        self.limits = limits
        self.fields: dict[str, str] = {}
        self.files: list[_Part] = []
        self.size = 0
        self.done = False
        self._part: _Part | None = None
        self._headers: list[tuple[bytes, bytes]] = []
        self._header = [bytearray(), bytearray()]
        callbacks: Any = {
            "on_part_begin": self._begin, "on_header_field": self._header_field,
            "on_header_value": self._header_value, "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished, "on_part_data": self._data, "on_part_end": self._end,
            "on_end": self._finish,
        }
        self._parser = MultipartParser(
            boundary, callbacks, max_header_count=MAX_PART_HEADERS, max_header_size=MAX_HEADER_BYTES
        )

    def feed(self, chunk: bytes) -> None:
        if self.done:
            return  # an epilogue after the closing boundary is ignored, as RFC 2046 says
        try:
            self._parser.write(chunk)
        except MultipartParseError as error:
            raise invalid(f"The body is not valid multipart/form-data: {error}.") from None

    def message_body(self) -> dict[str, Any]:
        """The JSON body the form stands for: its text fields, and `message` as input items when it holds files."""
        if not self.done:
            raise invalid("The multipart/form-data body ends before its closing boundary.")
        body: dict[str, Any] = {name: _field_value(name, text) for name, text in self.fields.items()}
        if self.files:
            text = body.pop("message", "")
            content = [{"type": "input_text", "text": text}] if text else []
            content += [_content_part(part) for part in self.files]
            body["message"] = [{"role": "user", "content": content}]
        return body

    # -- the parser's callbacks -----------------------------------------------------------------------------------
    def _begin(self) -> None:
        self._headers = []

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._header[0] += data[start:end]

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self._header[1] += data[start:end]

    def _header_end(self) -> None:
        self._headers.append((bytes(self._header[0]).lower(), bytes(self._header[1])))
        self._header = [bytearray(), bytearray()]

    def _headers_finished(self) -> None:
        headers = dict(self._headers)
        kind, options = parse_options_header(headers.get(b"content-disposition"))
        name = _text(options.get(b"name"), "a part's name")
        if kind != b"form-data" or name is None:
            raise invalid('Each part needs Content-Disposition: form-data; name="...".')
        filename = _text(options.get(b"filename"), "a file's name")
        declared = parse_options_header(headers.get(b"content-type"))[0].decode("latin-1") or None
        self._part = _Part(name, filename, declared)
        if filename is None:
            if name not in TEXT_FIELDS:
                raise invalid(f"The form has a field {name!r}; its fields are {', '.join(TEXT_FIELDS)}, and files.",
                              name, "extra_forbidden")
            if name in self.fields:
                raise invalid(f"The form gives {name!r} twice; give it once.", name)
            return
        self.files.append(self._part)
        self._part.number = len(self.files)
        if len(self.files) > self.limits.max_parts:
            raise AttachmentError(
                f"the form has more than max_parts={self.limits.max_parts} files; send at most that many in one "
                "message.", problem="too_many", size=len(self.files), limit=self.limits.max_parts,
            )

    def _data(self, data: bytes, start: int, end: int) -> None:
        part = self._part
        assert part is not None
        if part.filename is None:
            part.data += data[start:end]
            return
        size = len(part.data) + end - start
        if size > self.limits.max_part_bytes:
            raise AttachmentError(
                f"{_where(part)} is over max_part_bytes={self.limits.max_part_bytes}; send a smaller file.",
                problem="too_large", size=size, limit=self.limits.max_part_bytes,
            )
        self.size += end - start
        if self.size > self.limits.max_message_bytes:
            raise AttachmentError(
                f"the form's files add up to over max_message_bytes={self.limits.max_message_bytes}; send fewer or "
                "smaller files.", problem="message_too_large", size=self.size, limit=self.limits.max_message_bytes,
            )
        part.data += data[start:end]
        if part.media_type is None and len(part.data) >= SNIFF_BYTES:
            part.media_type = self._checked_type(part)

    def _end(self) -> None:
        part = self._part
        assert part is not None
        if part.filename is None:
            self.fields[part.name] = _decoded(part)
        elif not part.data and part.filename == "":
            self.files.remove(part)  # a file input left empty (browsers send it so): no file
        elif not part.data:
            raise AttachmentError(f"{_where(part)} is empty.", problem="bad_part")
        elif part.media_type is None:
            part.media_type = self._checked_type(part)
        self._part = None

    def _finish(self) -> None:
        self.done = True

    def _checked_type(self, part: _Part) -> str:
        """The type of the file's bytes: refused (415) when they are none `sniff` knows, not what the part says it
        is, or not allowed here."""
        sniffed = sniff(bytes(part.data[:SNIFF_BYTES]))
        if sniffed is None:
            raise AttachmentError(f"{_where(part)} is not a file type this server takes as an upload ({TAKEN}); "
                                  "send other files in a JSON body as input_file parts with file_data and a filename.",
                                  problem="unsupported_type")
        if part.declared in SNIFFED_TYPES and part.declared != sniffed:
            raise AttachmentError(f"{_where(part)} says it is {part.declared} but holds {sniffed} bytes; send the "
                                  "file's real type.", problem="type_mismatch")
        allowed = self.limits.media_types
        if allowed is not None and sniffed not in allowed:
            raise AttachmentError(f"{_where(part)} is {sniffed}, which this agency does not take; allowed: "
                                  f"{', '.join(sorted(allowed))}.", problem="unsupported_type")
        return sniffed


def _where(part: _Part) -> str:
    """How errors name a file: its place in the form and its field (not its name: what a client sent is not
    echoed back)."""
    return f"file {part.number} of the form (field {part.name!r})"


def _text(value: bytes | None, what: str) -> str | None:
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise invalid(f"The form has {what} that is not UTF-8.") from None


def _decoded(part: _Part) -> str:
    try:
        return bytes(part.data).decode("utf-8")
    except UnicodeDecodeError:
        raise invalid("Text must be valid UTF-8: the field holds bytes that are not.", part.name,
                      "invalid_utf8") from None


def _field_value(name: str, text: str) -> Any:
    """A text field as the JSON body holds it: `context` parsed as JSON, `background` as a boolean."""
    if name == "context":
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            raise invalid("context must be JSON text (an object).", name) from None
    if name == "background":
        return {"true": True, "false": False}.get(text.strip().lower(), text)
    return text


def _content_part(part: _Part) -> dict[str, Any]:
    media_type = part.media_type
    assert media_type is not None
    url = f"data:{media_type};base64,{base64.b64encode(part.data).decode('ascii')}"
    if media_type in IMAGE_TYPES:
        return {"type": "input_image", "image_url": url, "detail": "auto"}
    name = part.filename
    if not name or len(name) > MAX_FILENAME_CHARS or not name.isprintable():
        name = "file" + (mimetypes.guess_extension(media_type) or "")
    return {"type": "input_file", "file_data": url, "filename": name}
