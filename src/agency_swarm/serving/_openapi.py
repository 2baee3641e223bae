"""What the OpenAPI document says of the chat routes beyond their models: errors, links, SSE events, bearer scheme."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from ._bodies import CONTEXT_DOC, ErrorResponse
from ._sse import EventStreamResponse


def _when_type(kind: str, field: str, schema: str) -> dict[str, Any]:
    return {
        "if": {"properties": {"type": {"const": kind}}, "required": ["type"]},
        "then": {"required": [field], "properties": {field: {"$ref": f"#/components/schemas/{schema}"}}},
    }


_SSE_EVENT_SCHEMA: dict[str, Any] = {
    "description": "One event (OpenAPI 3.1 has no itemSchema: as in 3.2's, this schema describes each event).",
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"type": "string", "description": "The event's type, the same as its data's `type`."},
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": {
                "type": "object",
                "required": ["type"],
                "properties": {"type": {"type": "string"}},
                "allOf": [
                    _when_type("done", "result", "RunResultResponse"), _when_type("error", "error", "ErrorDetail")
                ],
            },
        },
    },
}
_SSE_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": (
            "Server-Sent Events, one per turn event in order: `event: <type>` and `data: <JSON of the event>` "
            "(type, agent, caller, depth, chat_id and the type's fields). The last event is `done` (data: "
            '{"type": "done", "result": RunResultResponse}) or `error` (data: {"type": "error", "error": '
            "ErrorDetail}). Comment lines (`: keep-alive`) may come between events."
        ),
        "content": {"text/event-stream": {"schema": _SSE_EVENT_SCHEMA}},
    }
}


_ERROR_DOCS = {
    400: "invalid_chat_id, or bad_request: a recipient that is not an entry point, resume decisions for calls that "
    "do not wait, a Content-Length that is not a number; or an image or file that is not valid (bad_part, bad_url, "
    "not_base64, ambiguous, bad_file_id, unknown_attachment)",
    401: "unauthorized: no bearer token, or one that is not valid (unknown, expired, another audience or issuer, an "
    "algorithm or key this server does not accept)",
    404: "not_found: no chat of that id for the caller (another principal's chat answers the same; a chat stored "
    "before chats had owners is an admin's), or no turn of that id in this chat (durable mode)",
    409: "chat_paused: the chat waits for approvals (see interruptions); nothing_to_resume: its last turn finished; "
    "cancelled: the turn was cancelled; turn_not_running: the turn to cancel has ended",
    413: "request_too_large: the body is over the server's limit; too_large, too_many, message_too_large: a "
    "message's images and files are over the agency's attachment limits (bytes per file, files per message, bytes "
    "per message)",
    415: "unsupported_media_type: the body is neither JSON (taken whatever its Content-Type says) nor "
    "multipart/form-data; unsupported_type, type_mismatch: an image or file of a type the agency does not take, or "
    "whose bytes are not the type it declares",
    422: "invalid_request: the body is not JSON of the expected shape, or its text is not valid UTF-8 (bytes that "
    "are not, or a lone surrogate escape like \\ud800)",
    500: "run_failed: the turn failed (max steps, model error...); internal_error: the server failed",
    503: "store_unavailable: the thread store cannot be reached; auth_unavailable: the identity provider's signing "
    "keys cannot be fetched",
}


def _error_docs(*statuses: int, protected: bool, sse: bool = False) -> dict[int | str, dict[str, Any]]:
    shown = [status for status in statuses if protected or status != 401]
    if sse:  # a `model` would be documented as the route's media type, text/event-stream: errors are JSON
        json_error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}
        return {status: {"description": _ERROR_DOCS[status], "content": json_error} for status in shown}
    return {status: {"model": ErrorResponse, "description": _ERROR_DOCS[status]} for status in shown}


_CHAT_OPERATIONS = ("post_message", "stream_message", "resume", "resume_stream", "get_threads", "delete_chat")


def _chat_links(approve: str | None = None) -> dict[str, Any]:
    """OpenAPI links from a response about a chat to what may follow on that chat (clients and fuzzers follow them);
    `approve`: where the response holds the call id of a tool call waiting for approval."""
    chat = {"chat_id": "$request.path.chat_id"}
    links: dict[str, Any] = {name: {"operationId": name, "parameters": chat} for name in _CHAT_OPERATIONS}
    if approve is not None:
        body = {"approve": [approve]}
        links["approve_waiting_call"] = {"operationId": "resume", "parameters": chat, "requestBody": body}
    return links


BEARER_SCHEME = "HTTPBearer"


def bearer_extra(*, protected: bool, extra: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The `openapi_extra` of a route: `extra`, and the bearer scheme when the app is `protected`. The document
    only names the scheme: AuthGuard checks the token, so no dependency runs per request to declare it."""
    if not protected:
        return extra
    return {**(extra or {}), "security": [{BEARER_SCHEME: []}]}


def show_bearer_scheme(app: FastAPI) -> None:
    """The app's OpenAPI document defines the bearer scheme its protected operations name (`bearer_extra`)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        spec = build()
        schemes = spec.setdefault("components", {}).setdefault("securitySchemes", {})
        schemes[BEARER_SCHEME] = {"type": "http", "scheme": "bearer"}
        return spec

    app.openapi = openapi  # type: ignore[method-assign]


def route_docs(
    *statuses: int, protected: bool, result: str | None = None, sse: bool = False, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The keyword arguments of a chat route: tags, the documented bearer scheme (with `extra`, its
    `openapi_extra`), its responses with their links."""
    responses = _error_docs(*sorted({*statuses, 404}), protected=protected, sse=sse)  # 404: not the caller's chat
    ok: dict[str, Any] = dict(_SSE_DOC[200]) if sse else {}
    ok["links"] = _chat_links(None if result is None else f"$response.body#{result}/interruptions/0/call_id")
    responses[200] = ok
    if 409 in responses:  # chat_paused lists the calls waiting for approval
        responses[409] = {**responses[409], "links": _chat_links("$response.body#/error/interruptions/0/call_id")}
    docs: dict[str, Any] = {
        "tags": ["chats"], "responses": responses, "openapi_extra": bearer_extra(protected=protected, extra=extra)
    }
    if sse:
        docs.update(status_code=200, response_class=EventStreamResponse)
    return docs


def form_body(*, durable: bool) -> dict[str, Any]:
    """The `openapi_extra` of a message route: the same request as multipart/form-data, with file parts."""
    text = {"type": "string"}
    fields: dict[str, Any] = {
        "message": {**text, "description": "What the user says (it comes before the files in the message)."},
        "recipient_agent": {**text, "description": "An entry point of the agency by name."},
        "context": {**text, "contentMediaType": "application/json", "description": "JSON text: " + CONTEXT_DOC},
        "additional_instructions": {**text, "description": "As in the JSON body."},
        "files": {
            "type": "array", "items": {"type": "string", "format": "binary"},
            "description": "Images (PNG, JPEG, GIF, WebP) and PDF files, in any part with a filename; each becomes "
            "an input_image or input_file part of the message. Their type is read from their bytes.",
        },
    }
    if durable:
        fields["background"] = {"type": "string", "enum": ["true", "false"], "description": "As in the JSON body."}
    schema = {"type": "object", "properties": fields}
    return {"requestBody": {"content": {"multipart/form-data": {"schema": schema}}}}
