"""Text in and out of the API: request bodies must be valid UTF-8, and every JSON response encodes."""

from __future__ import annotations

import json
import re
from collections import deque
from typing import Any

from fastapi import Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
"""A JSON escape of a UTF-16 surrogate (\\uD800-\\uDFFF): the only way valid UTF-8 JSON can spell a lone one."""
_SURROGATE = re.compile("[\ud800-\udfff]")
_MAX_TEXT_PROBLEMS = 20


def _well_formed(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (two code points that form a pair become its character)."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def utf8(text: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:  # stored before the entry check, or through the Python API: replaced in this response
        return _well_formed(text).encode()


def _json_bytes(content: Any) -> bytes:
    """Compact JSON as strict UTF-8, whatever the text in it: lone surrogates come out as U+FFFD."""
    return utf8(json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")))


class JSONBody(JSONResponse):
    """A JSONResponse that never fails on text a stored chat holds (`_json_bytes`)."""

    def render(self, content: Any) -> bytes:
        return _json_bytes(content)


def model_response(model: BaseModel, status_code: int = 200) -> Response:
    try:
        body = model.model_dump_json().encode()  # pydantic's own encoder, fast: the usual case
    except PydanticSerializationError:  # a lone surrogate pydantic cannot encode
        body = _json_bytes(model.model_dump(mode="json"))
    return Response(body, status_code=status_code, media_type="application/json")


def _not_utf8(loc: list[str | int], what: str) -> dict[str, Any]:
    return {"loc": loc, "msg": f"Text must be valid UTF-8: {what}.", "type": "invalid_utf8"}


def _surrogate_locations(value: Any) -> list[list[str | int]]:
    """Where, in a parsed JSON body, a string holds a lone surrogate (a key: where its object is); in order."""
    found: list[list[str | int]] = []
    pending: deque[tuple[list[str | int], Any]] = deque([(["body"], value)])
    while pending and len(found) < _MAX_TEXT_PROBLEMS:
        loc, current = pending.popleft()
        if isinstance(current, str) and _SURROGATE.search(current):
            found.append(loc)
        elif isinstance(current, dict):
            if any(_SURROGATE.search(key) for key in current):
                found.append(loc)  # the key itself is not echoed back
            pending.extend(([*loc, key], item) for key, item in current.items() if not _SURROGATE.search(key))
        elif isinstance(current, list):
            pending.extend(([*loc, index], item) for index, item in enumerate(current))
    return found


def text_problems(body: bytes) -> list[dict[str, Any]]:
    """What makes a request body's text invalid UTF-8, as validation details; [] for a fine body (or one that is not
    JSON: the route says so). Bytes that are not UTF-8 (RFC 8259: JSON on the wire is UTF-8), or a string spelling a
    lone surrogate, `"\\ud800"`: valid JSON, but no text, and no UTF-8 encoder takes it."""
    if json.detect_encoding(body) not in ("utf-8", "utf-8-sig"):  # what json.loads would decode it as: UTF-16/32
        return [_not_utf8(["body"], "the body is not UTF-8")]
    if not body.isascii():
        try:
            body.decode("utf-8")  # strict: surrogates encoded as bytes (CESU-8) fail here too
        except UnicodeDecodeError:
            return [_not_utf8(["body"], "the body holds bytes that are not UTF-8")]
    if _SURROGATE_ESCAPE.search(body) is None:
        return []
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return []
    return [_not_utf8(loc, "this holds a lone surrogate (\\uD800-\\uDFFF without its pair)") for loc in
            _surrogate_locations(parsed)]
