"""Retries, timeouts and clear errors around any agents.Model: the wrapper every agent's model is called through."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import Token
from dataclasses import dataclass, field
from datetime import UTC
from email.utils import parsedate_to_datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import httpx2
import openai
from agents import Model, ModelResponse, OpenAIChatCompletionsModel, OpenAIResponsesModel
from agents.items import TResponseStreamEvent

if TYPE_CHECKING:
    from agents import AgentOutputSchemaBase, Handoff, ModelSettings, Tool
    from agents.items import TResponseInputItem
    from agents.models.interface import ModelTracing
    from openai.types.responses.response_prompt_param import ResponsePromptParam

from .._base import _sdk
from .._base._errors import (
    ConfigError,
    ModelAuthenticationError,
    ModelError,
    ModelRequestError,
    ModelTimeout,
    ModelUnavailable,
)
from .._base._redact import redact_secrets

T = TypeVar("T")

_RETRY_STATUSES = frozenset({408, 409, 429})
"""Besides every 5xx: request timeout, conflict (a concurrent update) and rate limit."""


@dataclass(kw_only=True, frozen=True)
class RetryPolicy:
    """How often and how patiently a failed model call is tried again.

    Only transient failures are retried: HTTP 408/409/429 and 5xx, connection errors and resets, timeouts.
    Bad requests and rejected credentials (400, 401, 403, 404, 422...) fail at once. A streamed call is retried
    only while the model has not produced its first event. The wait before attempt n + 1 is drawn uniformly from
    [0, min(max_delay, initial_delay * 2 ** (n - 1))] ("full jitter"), or is exactly that bound with
    `jitter=False`. A `Retry-After` (or `retry-after-ms`) header from the server raises it to what the server
    asked, up to `max_retry_after` (not `max_delay`: retrying a rate limit early only burns attempts).
    """

    max_attempts: int = 3
    """Attempts in all, the first included; 1 turns retries off."""
    initial_delay: float = 0.5
    """Seconds: the bound of the first wait."""
    max_delay: float = 8.0
    """Seconds: no backoff wait is longer (a server's `Retry-After` may ask for more; see `max_retry_after`)."""
    jitter: bool = True
    max_retry_after: float = 60.0
    """Seconds: the longest wait a server's `Retry-After` / `retry-after-ms` header is granted."""
    sleep: Callable[[float], Awaitable[Any]] = field(default=asyncio.sleep, repr=False, compare=False)
    """Awaited with each wait in seconds. Tests pass a recorder here instead of waiting for real."""

    def __post_init__(self) -> None:
        attempts = self.max_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ConfigError(f"RetryPolicy: max_attempts must be an int >= 1 (1 means no retries), got {attempts!r}.")
        for name in ("initial_delay", "max_delay", "max_retry_after"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
                raise ConfigError(f"RetryPolicy: {name} must be a number of seconds >= 0, got {value!r}.")
        if not callable(self.sleep):
            raise ConfigError("RetryPolicy: sleep must be an async function taking seconds, like asyncio.sleep.")

    def delay(self, failed_attempts: int, retry_after: float | None = None) -> float:
        """The wait after `failed_attempts` failures."""
        bound = min(self.max_delay, self.initial_delay * 2 ** (failed_attempts - 1))
        wait = random.uniform(0, bound) if self.jitter else bound
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_retry_after))
        return wait


DEFAULT_RETRY = RetryPolicy()


def check_timeout(agent_name: str, timeout: Any) -> None:
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < float("inf"):
        raise ConfigError(f"Agent {agent_name!r}: timeout must be a number of seconds > 0 or None, got {timeout!r}.")


def check_retry(agent_name: str, retry: Any) -> None:
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise ConfigError(
            f"Agent {agent_name!r}: retry must be an agency_swarm.RetryPolicy or None, got {type(retry).__name__}."
        )


# -- what a failure means -------------------------------------------------------------------------------------

Kind = Literal["transient", "auth", "request", "other", "foreign"]


def _classify(error: BaseException) -> Kind:
    """transient: try again; auth/request: the call can never succeed as is; other: an API error we name;
    foreign: not the API's (a bug in a tool, a scripted failure...) and passes through untouched."""
    if isinstance(error, _TimedOut):
        return "transient"
    if isinstance(error, openai.APIStatusError):
        should_retry = _header(error, "x-should-retry")
        if should_retry in ("true", "false"):
            return "transient" if should_retry == "true" else _by_status(error.status_code, transient=False)
        return _by_status(error.status_code, transient=True)
    if isinstance(error, openai.APIConnectionError | httpx2.TransportError | ConnectionError | TimeoutError):
        return "transient"  # APITimeoutError is an APIConnectionError
    if isinstance(error, openai.OpenAIError):
        return "auth" if _lacks_credentials(error) else "other"
    return "foreign"


def _lacks_credentials(error: BaseException) -> bool:
    """The openai client found no API key: it raises a bare OpenAIError (no request, no status) when it is built."""
    if not isinstance(error, openai.OpenAIError) or isinstance(error, openai.APIError):
        return False
    text = str(error)
    return "api_key" in text or "credentials" in text.lower()


def missing_credentials(error: BaseException, *, agent: str, model: str) -> ModelAuthenticationError | None:
    """What to raise when building or calling an agent's model found no API key; None for any other error."""
    if not _lacks_credentials(error):
        return None
    shown = f"model {model!r}" if model else "the provider's default model"
    return ModelAuthenticationError(
        f"Agent {agent!r} ({shown}) has no API key: set OPENAI_API_KEY, or run offline models instead "
        "(--models on the command line, models= of Agency.from_config, or Agent(model=<an agents.Model>)).",
        model=model or None, agent=agent, chat_id="", depth=0,
    )


def _by_status(status: int, *, transient: bool) -> Kind:
    if status in (401, 403):
        return "auth"
    if transient and (status in _RETRY_STATUSES or status >= 500):
        return "transient"
    return "request" if status < 500 else "other"


def _header(error: openai.APIStatusError, name: str) -> str | None:
    value = error.response.headers.get(name)
    return value.strip().lower() if isinstance(value, str) else None


def _retry_after(error: BaseException) -> float | None:
    if not isinstance(error, openai.APIStatusError):
        return None
    millis = _header(error, "retry-after-ms")
    seconds = _header(error, "retry-after")
    try:
        if millis is not None:
            return max(0.0, float(millis) / 1000)
        if seconds is not None:
            return max(0.0, float(seconds))
    except ValueError:
        pass
    if seconds is None:
        return None
    try:  # an HTTP date
        when = parsedate_to_datetime(seconds)
    except (TypeError, ValueError):
        return None
    from datetime import datetime

    return max(0.0, (when - datetime.now(UTC)).total_seconds())


# -- keeping secrets out of messages ----------------------------------------------------------------------------

_DETAIL_LIMIT = 300


def _secrets_of(error: BaseException) -> list[str]:
    request = getattr(error, "request", None)
    headers = getattr(request, "headers", None)
    found: list[str] = []
    if headers is not None:
        for name in ("authorization", "api-key", "x-api-key"):
            value = headers.get(name)
            if isinstance(value, str) and value:
                found.append(value)
                token = value.partition(" ")[2]
                if token:
                    found.append(token)
    return sorted((secret for secret in found if len(secret) >= 4), key=len, reverse=True)


def redact(text: str, secrets: list[str]) -> str:
    """`text` without any of `secrets` and without anything shaped like an API key (the library's one redaction)."""
    return redact_secrets(text, secrets)


def _detail(error: BaseException) -> str:
    """What the API said, in one short line, with every credential removed."""
    message: Any = None
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else None
    if not isinstance(message, str) or not message:
        message = getattr(error, "message", None) if isinstance(error, openai.APIError) else None
    if not isinstance(message, str) or not message:
        message = str(error) or type(error).__name__
    if isinstance(error, openai.APIStatusError):
        message = f"HTTP {error.status_code}: {message}"
    elif not isinstance(error, openai.APIError):
        message = f"{type(error).__name__}: {message}"
    text = redact(" ".join(message.split()), _secrets_of(error))
    return text if len(text) <= _DETAIL_LIMIT else text[: _DETAIL_LIMIT - 3] + "..."


# -- the wrapper ------------------------------------------------------------------------------------------------

def _retries_on_its_own(model: Model) -> bool:
    """The SDK's provider models (OpenAI, LiteLLM, any-llm) retry inside their client unless the flag says not to."""
    return type(model).__module__.startswith("agents.") or isinstance(model, _SDK_MODELS)


_SDK_MODELS = (OpenAIResponsesModel, OpenAIChatCompletionsModel)  # and subclasses defined elsewhere


class _TimedOut(Exception):
    """This wrapper's own per-call timeout expired."""


class RetryingModel(Model):
    """Calls `inner` with the agent's RetryPolicy and timeout; turns API failures into ModelError subclasses.

    The error carries the agent's name; the loop fills in the chat id and depth. While it calls `inner`, the
    openai-agents flag that makes OpenAI (and LiteLLM) clients skip their own retries is set, so an
    `AsyncOpenAI(max_retries=2)` does not multiply this policy's attempts.
    """

    def __init__(
        self, inner: Model, *, agent: str, model_name: str, policy: RetryPolicy, timeout: float | None
    ) -> None:
        self.inner = inner
        self.agent = agent
        self.model_name = model_name
        self.policy = policy
        self.timeout = timeout
        self._quiets_client = _retries_on_its_own(inner)

    def wraps(self, inner: Model, *, agent: str, policy: RetryPolicy, timeout: float | None) -> bool:
        return self.inner is inner and self.agent == agent and self.policy is policy and self.timeout == timeout

    async def close(self) -> None:
        await self.inner.close()

    def get_retry_advice(self, request: Any) -> Any:
        return self.inner.get_retry_advice(request)

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: ResponsePromptParam | None = None,
    ) -> ModelResponse:
        attempt = partial(
            self.attempt, system_instructions, input, model_settings, tools, output_schema, handoffs, tracing,
            previous_response_id=previous_response_id, conversation_id=conversation_id, prompt=prompt,
        )
        try:
            return await attempt()
        except Exception as error:
            return await self.retry_after(error, attempt)

    def attempt(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: ResponsePromptParam | None = None,
    ) -> Awaitable[ModelResponse]:
        """One blocking attempt on the inner model: within the timeout, with the SDK clients' own retries silenced.

        With neither to do, it is the inner model's own call: no coroutine of ours around it."""
        response = self.inner.get_response(
            system_instructions, input, model_settings, tools, output_schema, handoffs, tracing,
            previous_response_id=previous_response_id, conversation_id=conversation_id, prompt=prompt,
        )
        if self.timeout is None and not self._quiets_client:
            return response
        return self._guarded(response)

    async def _guarded(self, response: Awaitable[ModelResponse]) -> ModelResponse:
        token = _sdk.quiet_client_retries() if self._quiets_client else None
        try:
            return await (response if self.timeout is None else self._bounded(response))
        finally:
            if token is not None:
                _sdk.restore_client_retries(token)

    def open_stream(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: ResponsePromptParam | None = None,
    ) -> StreamCall:
        """One streamed attempt (the arguments of `stream_response`); the request is sent while its first event is
        awaited. The inner model gets all three keyword arguments, as `Runner` passes them: the SDK's abstract
        signature gives them no defaults."""
        return StreamCall(
            self, (system_instructions, input, model_settings, tools, output_schema, handoffs, tracing),
            {"previous_response_id": previous_response_id, "conversation_id": conversation_id, "prompt": prompt},
        )

    async def retry_after(
        self, error: Exception, attempt: Callable[[], Awaitable[T]], attempts: Attempts | None = None
    ) -> T:
        """THE retry loop, for blocking and streamed calls alike, entered after a first attempt raised `error`.

        `attempt()` makes one more attempt. A streamed call whose events began to reach their reader
        (`attempts.started`) is never tried again: what was streamed cannot be taken back. Returns what an attempt
        gave, or raises what the last failure means.
        """
        if attempts is None:
            attempts = Attempts()
        while True:
            await self.policy.sleep(self.wait_or_raise(error, attempts.number, retry=not attempts.started))
            attempts.number += 1
            try:
                return await attempt()
            except Exception as again:
                error = again

    def wait_or_raise(self, error: Exception, attempt: int, *, retry: bool = True) -> float:
        """Raises what `error` means after `attempt` attempts, or returns the seconds to wait before the next."""
        failure = self._give_up(error, attempt, retry=retry)
        if failure is error:
            raise error
        if failure is not None:
            raise failure from None  # the original may quote the key; its parts are in `failure`
        return self.policy.delay(attempt, _retry_after(error))

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: ResponsePromptParam | None = None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        """The model's events, retried (by `retry_after`) until the first one; the loop reads a StreamCall itself."""
        args = (system_instructions, input, model_settings, tools, output_schema, handoffs, tracing)
        kwargs = {"previous_response_id": previous_response_id, "conversation_id": conversation_id, "prompt": prompt}
        attempts = Attempts()
        try:
            stream, first = await self._first_event(args, kwargs)
        except Exception as error:
            stream, first = await self.retry_after(error, partial(self._first_event, args, kwargs), attempts)
        attempts.started = True
        try:
            if first is _ENDED:
                return
            yield first
            async for event in stream.events:
                yield event
        except Exception as error:
            self.wait_or_raise(error, attempts.number, retry=False)  # raises what it means
            raise
        finally:
            await stream.aclose()

    async def _first_event(self, request: tuple[Any, ...], options: dict[str, Any]) -> tuple[StreamCall, Any]:
        stream = StreamCall(self, request, options)
        try:
            first = await anext(stream.events, _ENDED)
        except BaseException:
            await stream.aclose()
            raise
        stream.began()
        return stream, first

    async def _bounded_events(
        self, events: AsyncIterator[TResponseStreamEvent]
    ) -> AsyncIterator[TResponseStreamEvent]:
        """`events`, each one within the timeout; closing this closes them."""
        try:
            while True:
                try:
                    event = await self._bounded(anext(events))
                except StopAsyncIteration:
                    return
                yield event
        finally:
            await _close(events)

    async def _bounded(self, call: Awaitable[Any]) -> Any:
        assert self.timeout is not None
        try:
            async with asyncio.timeout(self.timeout) as scope:
                return await call
        except TimeoutError:
            if scope.expired():
                raise _TimedOut() from None
            raise

    def _give_up(self, error: Exception, attempt: int, *, retry: bool = True) -> Exception | None:
        """None: try again. Otherwise what to raise: the error itself when it is not the API's."""
        kind = _classify(error)
        if kind == "foreign":
            return error
        if kind == "transient" and retry and attempt < self.policy.max_attempts:
            return None
        where = f"Agent {self.agent!r} (model {self.model_name!r})"
        located: dict[str, Any] = {"agent": self.agent, "chat_id": "", "depth": 0}
        if isinstance(error, _TimedOut):
            return ModelTimeout(
                f"{where} got no answer within timeout={self.timeout:g} s"
                f"{_attempts(attempt)}. Raise Agent(timeout=...) if the model needs longer.",
                seconds=self.timeout, attempts=attempt, model=self.model_name, **located,
            )
        detail = _detail(error)
        status = getattr(error, "status_code", None)
        request_id = getattr(error, "request_id", None)
        common: dict[str, Any] = {"model": self.model_name, "status_code": status, "request_id": request_id}
        if kind == "auth":
            missing = missing_credentials(error, agent=self.agent, model=self.model_name) if status is None else None
            if missing is not None:  # no request was made: the client has no key at all
                return missing
            return ModelAuthenticationError(
                f"{where}: the model API refused the credentials ({detail}). Check the API key (OPENAI_API_KEY or "
                "the client's api_key) and that it may use this model.",
                **common, **located,
            )
        if kind == "request":
            hint = " Check the model name." if status == 404 else ""
            return ModelRequestError(
                f"{where}: the model API rejected the request ({detail}).{hint}", **common, **located
            )
        if kind == "transient":
            if isinstance(error, openai.APITimeoutError):
                return ModelTimeout(
                    f"{where}: the model API request timed out{_attempts(attempt)} ({detail}).",
                    seconds=None, attempts=attempt, **common, **located,
                )
            return ModelUnavailable(
                f"{where}: the model API failed{_attempts(attempt)}; last: {detail.rstrip('.')}. Retries are set by "
                "Agent(retry=RetryPolicy(...)) or Agency(retry=...).",
                attempts=attempt, **common, **located,
            )
        return ModelError(f"{where}: the model API failed: {detail}", **located)


class Attempts:
    """How far one model call has got: the attempt it is on, and (streamed) whether an event reached the reader."""

    __slots__ = ("number", "started")

    def __init__(self) -> None:
        self.number = 1
        self.started = False


_ENDED: Any = object()


class StreamCall:
    """One streamed attempt of a RetryingModel, read with a plain `async for` over `events`.

    `events` is the model's own stream (bounded per event when there is a timeout), so no generator of ours sits
    between each event and its reader. While the request is sent, the flag that quiets the SDK clients' own retries
    is set; `began()` (at the first event) or `aclose()` lifts it.
    """

    __slots__ = ("_token", "events")

    def __init__(self, model: RetryingModel, request: tuple[Any, ...], options: dict[str, Any]) -> None:
        events: AsyncIterator[Any] = aiter(model.inner.stream_response(*request, **options))
        if model.timeout is not None:
            events = model._bounded_events(events)
        self._token: Token[bool] | None = _sdk.quiet_client_retries() if model._quiets_client else None
        self.events = events

    def began(self) -> None:
        """The first event is here: the client flag is lifted before anyone sees it."""
        token, self._token = self._token, None
        if token is not None:
            _sdk.restore_client_retries(token)

    async def aclose(self) -> None:
        self.began()
        await _close(self.events)


async def _close(events: Any) -> None:
    """Close a model's stream; an async iterator that is not a generator may have no `aclose`."""
    close = getattr(events, "aclose", None)
    if close is not None:
        await close()


def _attempts(attempt: int) -> str:
    return "" if attempt == 1 else f" (after {attempt} attempts)"


def model_label(model: Any, fallback: str = "") -> str:
    """A model object's own name (its `model` attribute, as the SDK's models have, else its `name`, as
    ScriptedModel has), else `fallback` or its class name. Errors and price tables use it."""
    for attribute in ("model", "name"):
        name = getattr(model, attribute, None)
        if isinstance(name, str) and name:
            return name
    return fallback or type(model).__name__
