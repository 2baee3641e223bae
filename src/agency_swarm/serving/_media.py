"""The request body's media type: a JSON body is taken whatever Content-Type it declares (or none); others get 415."""

from __future__ import annotations

import json
from email.message import Message

from starlette.types import Scope

_JSON = b"application/json"
NOT_JSON = (
    "The request body is not JSON. Send a JSON object with `Content-Type: application/json`, e.g. "
    "curl --json '{\"message\": \"hi\"}' URL, or curl -H 'Content-Type: application/json' -d '{...}' URL."
)


def declares_json(content_type: bytes | None) -> bool:
    """application/json or application/*+json, parameters (charset) aside."""
    if content_type is None:
        return False
    parsed = Message()
    parsed["content-type"] = content_type.decode("latin-1")
    subtype = parsed.get_content_subtype()
    return parsed.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


def _is_json(body: bytes) -> bool:
    try:
        json.loads(body)
    except (ValueError, RecursionError):  # ValueError covers UnicodeDecodeError
        return False
    return True


def as_json_request(scope: Scope, headers: dict[bytes, bytes], body: bytes) -> Scope | None:
    """The scope to hand on for a chat route's body: as it is when it declares JSON (or has no body), relabelled
    application/json when the body is JSON under another Content-Type or none (`curl -d` says form-urlencoded);
    None when the body is not JSON (415)."""
    if not body or declares_json(headers.get(b"content-type")):
        return scope  # a malformed body declared JSON stays the route's 422, naming what is wrong
    if not _is_json(body):
        return None
    relabelled = [(key, value) for key, value in scope["headers"] if key.lower() != b"content-type"]
    return {**scope, "headers": [*relabelled, (b"content-type", _JSON)]}
