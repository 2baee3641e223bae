"""The JSON bodies the API takes and returns, and the status and error body each failure maps to."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Discriminator, Field, StrictBool, Tag

from .._base._errors import (
    AttachmentError,
    ChatPaused,
    ConfigError,
    InvalidChatId,
    NothingToResume,
    RunError,
    StoreError,
    TurnCancelled,
    TurnNotRunning,
    UnknownTurn,
)
from .._base._redact import secret_free_logger
from .._model._prices import priced
from .._turn._results import RunResult
from ._text import JSONBody

logger = secret_free_logger("agency_swarm.serving")


# -- request and response bodies ------------------------------------------------------------------------

CONTEXT_DOC = (
    "Reaches the turn's tools, guardrails and instructions as `RequestContext.data`, validated against the schema "
    "the server declares; a server that declares none answers 400 bad_request."
)


class InputText(BaseModel):
    """Text in a message."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["input_text"]
    text: str


class InputImage(BaseModel):
    """An image: an http(s) URL, a base64 data URL (`data:image/png;base64,...`) or a file id, exactly one."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["input_image"]
    image_url: str | None = None
    file_id: str | None = None
    detail: Literal["auto", "low", "high", "original"] = "auto"
    attachment: dict[str, Any] | None = Field(
        default=None, description="A stored image's reference, as a result's items hold it (sent again)."
    )


class InputFile(BaseModel):
    """A file (a PDF, say): a base64 data URL or bare base64 with `filename` (`file_data`), a URL or a file id."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["input_file"]
    file_data: str | None = None
    file_url: str | None = None
    file_id: str | None = None
    filename: str | None = None
    attachment: dict[str, Any] | None = Field(
        default=None, description="A stored file's reference, as a result's items hold it (sent again)."
    )


InputPart = Annotated[InputText | InputImage | InputFile, Field(discriminator="type")]


class UserMessage(BaseModel):
    """One user message of input items, as the model API takes it (only the user's role: the server's own
    instructions are not the client's to add, see `additional_instructions`)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["message"] | None = None
    role: Literal["user"]
    content: str | Annotated[list[InputPart], Field(min_length=1)]


def _message_kind(value: Any) -> str | None:
    return "text" if isinstance(value, str) else "items" if isinstance(value, list) else None


Message = Annotated[
    Annotated[str, Tag("text")] | Annotated[list[UserMessage], Field(min_length=1), Tag("items")],
    Discriminator(_message_kind, custom_error_type="text_or_items",
                  custom_error_message="Input should be a string or a list of input items"),
]
"""Text or input items; an error in anything else names the field itself (not each way it could have matched)."""


class MessageRequest(BaseModel):
    """A user message for one of the agency's entry points."""

    model_config = ConfigDict(extra="forbid")
    message: Message = Field(
        description=(
            "What the user says: text, or input items with images and files (each checked against the server's "
            "attachment limits, and stored once). The same fields come as multipart/form-data with file parts."
        ),
    )
    recipient_agent: str | None = Field(
        default=None, description="An entry point of the agency by name; default: the first entry point."
    )
    context: dict[str, Any] | None = Field(default=None, description=CONTEXT_DOC)
    additional_instructions: str | None = Field(
        default=None,
        description="Added to the entry agent's instructions for this turn. Only on a server that allows it "
        "(else 400 bad_request): whoever can call the server can then steer the agents (prompt injection).",
    )


def message_input(request: MessageRequest) -> Any:
    """The request's message as `Agency.get_response` takes it: its text, or its items as plain dicts."""
    if isinstance(request.message, str):
        return request.message
    return [item.model_dump(exclude_none=True) for item in request.message]


class DurableMessageRequest(MessageRequest):
    """A user message for one of the agency's entry points, in durable mode."""

    background: StrictBool = Field(
        default=False, description="Answer 202 at once with the turn's id; the turn runs on any worker."
    )


class ResumeRequest(BaseModel):
    """Decisions on tool calls waiting for approval; both lists may be empty (e.g. to resume after a crash)."""

    model_config = ConfigDict(extra="forbid")
    approve: list[str] = Field(default_factory=list, description="Call ids to run.")
    reject: list[str] | dict[str, str | None] = Field(
        default_factory=list,
        description='Call ids to refuse (the model reads "Tool execution was not approved."), or an object '
        "{call id: the message the model reads instead, or null for that default}.",
    )
    context: dict[str, Any] | None = Field(default=None, description=CONTEXT_DOC)


class UsageResponse(BaseModel):
    requests: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cached_tokens: int
    reasoning_tokens: int


class InterruptionResponse(BaseModel):
    """A tool call waiting for approval."""

    agent: str
    caller: str
    depth: int
    chat_id: str
    call_id: str
    tool: str
    arguments: str


class RunResultResponse(BaseModel):
    """One top-level turn's result (the SSE `done` event carries the same object as `result`)."""

    chat_id: str
    agent: str = Field(description="The entry agent that answered.")
    final_output: Any = Field(description="The entry agent's final output; null while the turn is paused.")
    new_items: list[dict[str, Any]] = Field(description="Items this turn added to the user's thread with `agent`.")
    usage: UsageResponse
    usage_by_agent: dict[str, UsageResponse]
    cost_usd: float | None = Field(
        description="The turn's estimated cost in USD, priced by `agency_swarm.MODEL_PRICES`; null when a model it "
        "called has no price there."
    )
    cost_by_agent: dict[str, float | None] = Field(
        description="The same per agent (null for an agent whose model has no price)."
    )
    paused: bool = Field(description="The turn waits for approvals: see `interruptions`, then POST .../resume.")
    interruptions: list[InterruptionResponse]


class ThreadsResponse(BaseModel):
    chat_id: str
    threads: dict[str, list[dict[str, Any]]] = Field(
        description=(
            'Stored items per thread key ("user->CEO", "CEO->Developer"): those the thread\'s model reads (a message '
            "between agents also keeps its `send_call_id`), and the bookkeeping marks between them with "
            "`?marks=true`; {} for an unknown chat."
        )
    )


class ErrorDetail(BaseModel):
    type: str = Field(description="Machine-readable kind, e.g. invalid_chat_id, chat_paused, unauthorized.")
    message: str
    details: list[dict[str, Any]] | None = Field(default=None, description="Which fields of the body are wrong.")
    interruptions: list[InterruptionResponse] | None = Field(default=None, description="With chat_paused.")


class ErrorResponse(BaseModel):
    error: ErrorDetail


class HealthResponse(BaseModel):
    status: Literal["ok"]


def id_for_header(value: str) -> str:
    """An id (a chat's, a turn's) as it goes in a header: percent-encoded UTF-8, every byte but RFC 3986's unreserved
    characters, so the header is ASCII whatever the id holds, and as a path segment it names the same resource."""
    return quote(value, safe="")


# -- results and errors as JSON ----------------------------------------------------------------------------


def _usage(usage: Any) -> UsageResponse:
    return UsageResponse(
        requests=usage.requests, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens, cached_tokens=usage.input_tokens_details.cached_tokens or 0,
        reasoning_tokens=usage.output_tokens_details.reasoning_tokens or 0,
    )


def _interruptions(items: Iterable[Any]) -> list[InterruptionResponse]:
    return [
        InterruptionResponse(
            agent=item.agent, caller=item.caller, depth=item.depth, chat_id=item.chat_id, call_id=item.call_id,
            tool=item.tool, arguments=item.arguments,
        )
        for item in items
    ]


def result_response(result: RunResult) -> RunResultResponse:
    """A RunResult as the JSON body the API returns."""
    cost, cost_by_agent = priced(result.totals_by_model)
    return RunResultResponse(
        chat_id=result.chat_id, agent=result.agent, final_output=jsonable_encoder(result.final_output),
        new_items=result.new_items, usage=_usage(result.usage),
        usage_by_agent={name: _usage(usage) for name, usage in result.usage_by_agent.items()},
        cost_usd=cost, cost_by_agent=cost_by_agent,
        paused=result.paused, interruptions=_interruptions(result.interruptions),
    )


def error_response(
    status: int, kind: str, message: str, headers: Mapping[str, str] | None = None, **extra: Any
) -> JSONResponse:
    detail = ErrorDetail(type=kind, message=message, **extra)
    sent = dict(headers or {})
    if status == 401:
        sent["www-authenticate"] = "Bearer"
    return JSONBody({"error": detail.model_dump(mode="json", exclude_none=True)}, status_code=status, headers=sent)


def paused_over_http(message: str, chat_id: str) -> str:
    """A ChatPaused message with the HTTP way to go on, `POST /chats/{id}/resume`, instead of the Python call."""
    route = f"POST /chats/{id_for_header(chat_id)}/resume"
    return message.replace(
        ChatPaused.RESUME_HINT,
        f'{route} with {{"approve": [call ids], "reject": [call ids]}} before sending a new message.',
    )


ATTACHMENT_STATUS = {
    "too_large": 413, "too_many": 413, "message_too_large": 413, "type_mismatch": 415, "unsupported_type": 415,
}
"""An attachment refused over a limit is 413, one of a type the server does not take 415; others 400 (the error's
type is the `AttachmentError.problem`)."""

_TURN_ERRORS: dict[type[Exception], tuple[int, str]] = {
    UnknownTurn: (404, "not_found"), TurnNotRunning: (409, "turn_not_running"), TurnCancelled: (409, "cancelled"),
}


def error_status(exc: BaseException) -> tuple[int, ErrorDetail]:
    """The HTTP status and body for an exception a turn raised; the message never holds a stack trace."""
    if isinstance(exc, InvalidChatId):
        return 400, ErrorDetail(type="invalid_chat_id", message=str(exc))
    if isinstance(exc, ChatPaused):
        message = paused_over_http(str(exc), exc.chat_id)
        return 409, ErrorDetail(type="chat_paused", message=message, interruptions=_interruptions(exc.interruptions))
    if isinstance(exc, NothingToResume):
        return 409, ErrorDetail(type="nothing_to_resume", message=str(exc))
    if isinstance(exc, AttachmentError):
        return ATTACHMENT_STATUS.get(exc.problem, 400), ErrorDetail(type=exc.problem, message=str(exc))
    for kind, (status, name) in _TURN_ERRORS.items():
        if isinstance(exc, kind):
            return status, ErrorDetail(type=name, message=str(exc))
    if isinstance(exc, ConfigError):
        return 400, ErrorDetail(type="bad_request", message=str(exc))
    if isinstance(exc, StoreError):  # its message names the database: the log gets it, the client does not
        return 503, ErrorDetail(type="store_unavailable", message="The thread store is unavailable; try again.")
    if isinstance(exc, RunError):
        return 500, ErrorDetail(type="run_failed", message=str(exc))
    return 500, ErrorDetail(type="internal_error", message="The turn failed inside the server; see its log.")


def failure_response(exc: Exception, chat_id: str) -> JSONResponse:
    status, detail = error_status(exc)
    if status >= 500:
        logger.error("Chat %r: %s", chat_id, detail.type, exc_info=exc)
    return JSONBody({"error": detail.model_dump(mode="json", exclude_none=True)}, status_code=status)
