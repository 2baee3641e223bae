"""The turn loop's hooks: one `TurnWatch` per top-level turn, made only when telemetry is on (`_switch.ACTIVE`).

Spans (when a tracer is on) follow the GenAI semantic conventions where they have a name for it: a turn, each
agent's turn (`invoke_agent`), each model call (`chat`), tool call (`execute_tool`) and send (`execute_tool`
`send_message`, the recipient's agent span under it). Message text goes on spans only with `content` on.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .._base._errors import StoreError
from ._carry import WORKFLOW_ID
from ._request import REQUEST
from ._switch import Telemetry

OPERATION, AGENT, MODEL, TOOL = "gen_ai.operation.name", "gen_ai.agent.name", "gen_ai.request.model", "gen_ai.tool.name"
CHAT_ID = "agency_swarm.chat_id"


class TurnWatch:
    """Spans and metrics of one top-level turn and every agent, model call, tool call and send in it."""

    __slots__ = ("agent", "content", "light", "metrics", "span", "spans", "started", "tracer")

    def __init__(self, telemetry: Telemetry, entry_agent: str, chat_id: str) -> None:
        self.tracer, self.metrics, self.content = telemetry.tracer, telemetry.metrics, telemetry.content
        self.agent, self.span, self.spans = entry_agent, None, None  # type: str, Any, Any
        self.light: Any = None
        """The LightTracer when the turn's span is a LightSpan: every span under it is one, made by `internal`."""
        self.started = time.perf_counter()
        if self.tracer is not None:
            self._start_turn_span(_spans_module(), chat_id)
        if self.metrics is not None:
            self.metrics.turn_started()

    @property
    def idle(self) -> bool:
        """Nothing to record: no metrics, and the turn's trace sampled out."""
        return self.spans is None and self.metrics is None

    def _start_turn_span(self, spans: Any, chat_id: str) -> None:
        attributes = {CHAT_ID: chat_id, AGENT: self.agent}
        workflow = durable_workflow_id()
        if workflow is not None:
            attributes[WORKFLOW_ID] = workflow
        self.span = spans.start(self.tracer, f"turn {self.agent}", spans.current_span(), attributes)
        if self.span.is_recording():  # else sampled out, and so would every span under it be
            self.spans = spans
            if self.span.__class__ is spans.LightSpan and self.tracer.__class__ is spans.LightTracer:
                self.light = self.tracer

    def end(self, error: BaseException | None, paused: bool) -> None:
        outcome = outcome_of(error, paused)
        if self.metrics is not None:
            self.metrics.turn_ended(self.agent, outcome, time.perf_counter() - self.started)
            if isinstance(error, StoreError):
                self.metrics.store_errors.inc()
                note = REQUEST.get()
                if note is not None:
                    note.store_error_counted = True
        if self.spans is not None:
            self.spans.annotate(self.span, {"agency_swarm.turn.outcome": outcome})
            self.spans.end(self.span, error)

    def _start(self, turn: Any, name: str, attributes: dict[str, Any]) -> Any:
        assert self.spans is not None
        parent = self.span if turn.otel is None else turn.otel
        if self.light is not None:
            return self.light.internal(parent, name, attributes)
        return self.spans.start(self.tracer, name, parent, attributes)

    def agent_started(self, turn: Any) -> None:
        """The span of one agent's turn (`invoke_agent`), under its send's span (or the turn's): `turn.otel` until
        `agent_ended`. Nothing when the turn is not traced."""
        if self.spans is not None:
            name = turn.agent.name
            turn.otel = self._start(turn, f"invoke_agent {name}", {OPERATION: "invoke_agent", AGENT: name})

    def agent_ended(self, turn: Any, error: BaseException | None) -> None:
        if self.spans is None:
            return
        span = turn.otel
        if error is None:
            if self.content and turn.output is not None:
                span.set_attribute("gen_ai.output.text", str(turn.output))
            span.end()
        else:
            self.spans.end(span, error)

    def model_call(self, turn: Any, model: str) -> ModelCallWatch:
        span = None
        if self.spans is not None:
            span = self._start(turn, f"chat {model}", {OPERATION: "chat", MODEL: model})  # the agent: its parent
        return ModelCallWatch(self, span, turn.agent.name, model)

    @contextmanager
    def tool_call(self, turn: Any, tool: str, call_id: str, arguments: str) -> Iterator[Any]:
        """The span of one function tool call (`execute_tool`); yields the span (None when not traced)."""
        if self.spans is None:
            yield None
            return
        attributes = {OPERATION: "execute_tool", TOOL: tool, "gen_ai.tool.call.id": call_id, AGENT: turn.agent.name}
        if self.content:
            attributes["gen_ai.tool.call.arguments"] = arguments
        span = self._start(turn, f"execute_tool {tool}", attributes)
        error: BaseException | None = None
        try:
            yield span
        except BaseException as failure:
            error = failure
            raise
        finally:
            self.spans.end(span, error)

    def send(self, turn: Any, sub: Any, recipient: str, call_id: str, message: str) -> Any:
        """The span of a send (the recipient's agent span goes under it: `sub.otel`), or None."""
        if self.spans is None:
            return None
        attributes = {
            OPERATION: "execute_tool", TOOL: "send_message", "gen_ai.tool.call.id": call_id, AGENT: turn.agent.name,
            "agency_swarm.recipient": recipient, "agency_swarm.depth": sub.depth,
        }
        if self.content:
            attributes["agency_swarm.message"] = message
        sub.otel = span = self._start(turn, f"send_message {recipient}", attributes)
        return span

    def sent(self, span: Any, error: BaseException | None) -> None:
        if span is not None and self.spans is not None:
            self.spans.end(span, error)


class ModelCallWatch:
    """One model call's span and latency; `end` with its usage (tokens on the span, tokens and cost counted)."""

    __slots__ = ("agent", "model", "span", "started", "watch")

    def __init__(self, watch: TurnWatch, span: Any, agent: str, model: str) -> None:
        self.watch, self.span, self.agent, self.model = watch, span, agent, model
        self.started = time.perf_counter()

    def end(self, usage: Any, error: BaseException | None = None) -> None:
        """Once: a call whose usage was counted may still fail after it (its hooks, storing its items)."""
        if self.started < 0:
            return
        seconds, self.started = time.perf_counter() - self.started, -1.0
        metrics = self.watch.metrics
        if metrics is not None:
            metrics.model_called(self.agent, self.model, seconds, usage, error)
        span = self.span
        if span is None:
            return
        spans = self.watch.spans
        assert spans is not None
        if usage is not None:
            spans.annotate(span, {"gen_ai.usage.input_tokens": usage.input_tokens or 0,
                                  "gen_ai.usage.output_tokens": usage.output_tokens or 0})
        if error is None:
            span.end()
        else:
            spans.end(span, error)


_SPANS: Any = None


def _spans_module() -> Any:
    """`_spans`, imported on the first traced turn (it imports OpenTelemetry, an extra) and kept, not imported again
    on every turn."""
    global _SPANS
    if _SPANS is None:
        from . import _spans

        _SPANS = _spans
    return _SPANS


def outcome_of(error: BaseException | None, paused: bool) -> str:
    """completed, paused, cancelled or failed."""
    if error is None:
        return "paused" if paused else "completed"
    if isinstance(error, GeneratorExit | asyncio.CancelledError):
        return "cancelled"
    return "failed"


def durable_workflow_id() -> str | None:
    """The DBOS workflow this turn runs in (durable mode), if any: read only when dbos is already imported."""
    dbos = sys.modules.get("dbos")
    if dbos is None:
        return None
    try:
        workflow = dbos.DBOS.workflow_id
    except Exception:  # outside a workflow some versions raise instead of answering None
        return None
    return workflow if isinstance(workflow, str) else None


def watch_turn(telemetry: Telemetry | None, entry_agent: str, chat_id: str) -> TurnWatch | None:
    """The turn's watch, or None when there is nothing to record (telemetry off, or only spans and the turn's trace
    sampled out): the loop then runs as with telemetry off."""
    if telemetry is None:
        return None
    watch = TurnWatch(telemetry, entry_agent, chat_id)
    return None if watch.idle else watch
