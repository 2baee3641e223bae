"""Text in and out of the API: request bodies must be valid UTF-8, and every JSON response encodes."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from fastapi import Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
"""A JSON escape of a UTF-16 surrogate (\\uD800-\\uDFFF): the only way valid UTF-8 JSON can spell a lone one."""
_SURROGATE = re.compile("[\ud800-\udfff]")


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


def _children(container: dict[str, Any] | list[Any]) -> Iterator[tuple[str | int, Any]]:
    return iter(container.items()) if isinstance(container, dict) else enumerate(container)


def _lone_surrogate_in_keys(value: Any) -> bool:
    # keys joined: Python strings never merge two surrogate code points into a pair, so one search sees them all
    return isinstance(value, dict) and _SURROGATE.search("".join(value)) is not None


def first_lone_surrogate(value: Any) -> list[str | int] | None:
    """Where, in a parsed JSON body, the first string (in document order) holding a lone surrogate is; for a key,
    where its object is (the key is not echoed). None when there is none.

    Depth-first with one iterator per open container: time linear in the number of values, memory linear in the
    depth, no recursion (any depth), and the path is built once, for the string found."""
    if isinstance(value, str):
        return ["body"] if _SURROGATE.search(value) else None
    if not isinstance(value, (dict, list)):
        return None
    if _lone_surrogate_in_keys(value):
        return ["body"]
    keys: list[str | int] = []  # keys[i]: the key under which open container i + 1 sits in container i
    open_containers = [_children(value)]
    while open_containers:
        for key, child in open_containers[-1]:
            if isinstance(child, str):
                if _SURROGATE.search(child):
                    return ["body", *keys, key]
            elif isinstance(child, (dict, list)):
                if _lone_surrogate_in_keys(child):
                    return ["body", *keys, key]
                keys.append(key)
                open_containers.append(_children(child))
                break
        else:  # this container is done: back to its parent, which goes on after it
            open_containers.pop()
            if keys:
                keys.pop()
    return None


def text_problems(body: bytes) -> list[dict[str, Any]]:
    """What makes a request body's text invalid UTF-8, as validation details (the first problem only); [] for a fine
    body (or one that is not JSON: the route says so). Bytes that are not UTF-8 (RFC 8259: JSON on the wire is
    UTF-8), or a string spelling a lone surrogate, `"\\ud800"`: valid JSON, but no text, and no UTF-8 encoder takes it.

    Linear in the body's size, in time and memory: a strict decode, a regex search, and only when that finds a
    surrogate's escape, one parse and one walk (`first_lone_surrogate`)."""
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
    except (ValueError, RecursionError):  # not JSON (or nested past the parser's limit): the route refuses it
        return []
    loc = first_lone_surrogate(parsed)
    return [] if loc is None else [_not_utf8(loc, "this holds a lone surrogate (\\uD800-\\uDFFF without its pair)")]
