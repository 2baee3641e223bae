"""RunResult, the streaming handle, and the usage budget shared by every agent of one turn."""

from __future__ import annotations

import asyncio
import copy
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from agents import (
    ModelResponse,
    OutputGuardrailResult,
    RunContextWrapper,
    ToolInputGuardrailResult,
    ToolOutputGuardrailResult,
    Usage,
)

from .._base._errors import TurnCancelled
from .._base._events import Event
from .._model._usage import UsageTotals, totals_by_model, usage_of
from ._channel import TurnStart, drive
from ._tool_guardrails import AgentInputGuardrailResult, GuardrailLog

if TYPE_CHECKING:
    from .._model._cost import CostEstimate, ModelPrice
    from ._definition import AgentBase


@dataclass(kw_only=True, frozen=True)
class Interruption:
    """A tool call waiting for approval; pass its `call_id` to `resume(approve=[...])` or `reject=[...]`."""

    agent: str
    """The agent whose tool it is."""
    caller: str
    depth: int
    chat_id: str
    call_id: str
    tool: str
    arguments: str
    """The JSON arguments the model chose."""
    namespace: str | None = None
    """The tool's namespace (`agents.tool_namespace`) when the call named one: `namespace.tool` is what waits."""


class TurnState(Protocol):
    """What a RunResult reads from its turn's state (`_state.Run`) when asked."""

    def context(self) -> RunContextWrapper[Any]: ...


@dataclass(kw_only=True)
class RunResult:
    """What one top-level turn produced."""

    final_output: Any
    """The entry agent's final output: a str, or an instance of its `output_type`."""
    new_items: list[dict[str, Any]]
    """The items this turn added to the thread between the caller and the entry agent."""
    chat_id: str
    agent: str
    """The name of the agent that answered."""
    interruptions: list[Interruption] = field(default_factory=list)
    """Tool calls waiting for approval (nested agents' included); empty unless the turn paused."""
    tool_guardrails: GuardrailLog | None = field(repr=False, default=None)
    """The turn's guardrail results, tools' and agents' (None when nothing had guardrails); read them through the
    four `*_guardrail_results` properties."""
    usage_records: list[tuple[tuple[str, str], Any]] = field(repr=False, default_factory=list)
    """((agent, model name), the usage that model call reported) for every model call of the turn, in order."""
    turn_items: list[dict[str, Any]] | None = field(repr=False, default=None)
    """A resumed turn's items from its user message on (what came before the pause included); None when the turn
    began with this result (`new_items` are all of it)."""
    last_agent: AgentBase | None = field(repr=False, default=None)
    """The agent that answered (the object; `agent` is its name), as `Runner`'s `last_agent`."""
    _run: TurnState | None = field(repr=False, default=None, compare=False)
    _responses_of: Callable[[Any], list[ModelResponse]] | None = field(repr=False, default=None, compare=False)
    """The turn's state, and how its responses become `raw_responses`: read only when asked (no object is made
    per turn for them)."""

    @property
    def input_guardrail_results(self) -> list[AgentInputGuardrailResult]:
        """Every agent input guardrail that ran in the turn (nested agents' included), in order: the SDK's
        `InputGuardrailResult` with the `agent` it checked."""
        return [] if self.tool_guardrails is None else self.tool_guardrails.agent_inputs

    @property
    def output_guardrail_results(self) -> list[OutputGuardrailResult]:
        """Every agent output guardrail that ran in the turn (nested agents' included, each result names its
        `agent`), in order."""
        return [] if self.tool_guardrails is None else self.tool_guardrails.agent_outputs

    @property
    def raw_responses(self) -> list[ModelResponse]:
        """Every model response of the turn (nested agents' included), in the order they came, as the SDK's
        `ModelResponse`: output items, usage, response id. Their usage sums to `usage`."""
        built: list[ModelResponse] | None = self.__dict__.get("_raw_responses")
        if built is None:  # converted when first asked: a streamed call kept the API's Response
            run, convert = self._run, self._responses_of
            built = self.__dict__["_raw_responses"] = [] if run is None or convert is None else convert(run)
        return built

    @property
    def context_wrapper(self) -> RunContextWrapper[Any]:
        """The SDK run context the turn's tools, hooks and guardrails got: `context` is the object passed as
        `context=`, `usage` the turn's usage so far, `turn_input` the user's message."""
        if self._run is None:
            return RunContextWrapper(context=None)
        return self._run.context()

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a durable turn's stored result) without what belongs to the process that ran the turn: the agent
        object and the turn's state. Unpickled, `last_agent` is None, `raw_responses` empty unless read before, and
        `context_wrapper` a new, empty one."""
        state = dict(self.__dict__)
        state["last_agent"] = state["_run"] = state["_responses_of"] = None
        return state

    def to_input_list(self) -> list[dict[str, Any]]:
        """The turn's input and new items as model input items (a copy of `new_items`; for a resumed turn, of every
        item since its user message), as `Runner`'s `to_input_list()`: append the next message to go on elsewhere.
        Images and files given as bytes appear by reference (`attachment`: their sha256), as the chat stores them;
        sent to the same chat again, they resolve into the same data."""
        return copy.deepcopy(self.new_items if self.turn_items is None else self.turn_items)

    @property
    def totals_by_model(self) -> dict[tuple[str, str], UsageTotals]:
        """(agent, model name) -> usage: what `cost` prices, and what every usage view below is summed from."""
        # Summed when first asked: most callers never read usage, and a turn then pays ~1 µs less per model call.
        totals: dict[tuple[str, str], UsageTotals] | None = self.__dict__.get("_totals")
        if totals is None:
            totals = self.__dict__["_totals"] = totals_by_model(self.usage_records)
        return totals

    @property
    def tool_input_guardrail_results(self) -> list[ToolInputGuardrailResult]:
        """Every function tool input guardrail that ran in the turn (nested agents' included), in order."""
        return [] if self.tool_guardrails is None else self.tool_guardrails.inputs

    @property
    def tool_output_guardrail_results(self) -> list[ToolOutputGuardrailResult]:
        """Every function tool output guardrail that ran in the turn (nested agents' included), in order."""
        return [] if self.tool_guardrails is None else self.tool_guardrails.outputs

    @property
    def paused(self) -> bool:
        """The turn stopped to wait for approvals: `final_output` is None until `resume` finishes it."""
        return bool(self.interruptions)

    @property
    def usage(self) -> Usage:
        """Usage summed over every model call of the turn, nested agents included."""
        # summed and built on demand: an agents.Usage costs ~10 µs to construct, and most callers never ask
        return usage_of(usage for _, usage in self.usage_records)

    @property
    def usage_by_agent(self) -> dict[str, Usage]:
        """The same usage split by agent name."""
        return self._split(0)

    @property
    def usage_by_model(self) -> dict[str, Usage]:
        """The same usage split by model name (an agent's model string, or the model object's `model`)."""
        return self._split(1)

    def _split(self, part: int) -> dict[str, Usage]:
        groups: dict[str, list[Any]] = {}
        for key, usage in self.usage_records:
            groups.setdefault(key[part], []).append(usage)
        return {name: usage_of(usages) for name, usages in groups.items()}

    def cost(self, prices: Mapping[str, ModelPrice | Mapping[str, float]] | None = None) -> CostEstimate:
        """What this turn cost by `prices` (model name -> ModelPrice per 1M tokens; default: `MODEL_PRICES`, in
        USD), by agent and by model.

        Raises ConfigError naming any model of the turn that has no price.
        """
        from .._model._cost import estimate_cost
        from .._model._prices import MODEL_PRICES, price_of

        if prices is None:  # the default table, its snapshot and provider-prefixed names included
            known = {model: price_of(model) for _, model in self.totals_by_model}
            prices = {**MODEL_PRICES, **{model: price for model, price in known.items() if price is not None}}
        return estimate_cost(self.totals_by_model, prices)


class ResponseStream:
    """An async iterator of events; `result` holds the RunResult once the stream is exhausted.

    Iterate it once. Breaking out of the loop cancels the turn; what was produced is kept and saved.
    `async with` (or `await stream.aclose()`) waits until that clean-up has finished.
    """

    def __init__(
        self, start: Callable[[ResponseStream], TurnStart], *, streaming: bool = True
    ) -> None:
        self._start = start
        self.streaming = streaming
        """False when a blocking get_response drives this turn: models are then called without streaming."""
        self._generator: weakref.ref[AsyncGenerator[Event, None]] | None = None
        self._finished = False
        self._closed: asyncio.Event | None = None  # made only when someone waits: blocking turns never do
        self._result: RunResult | None = None
        self._started = False
        self.turn_id: str | None = None
        """The running turn's id once it started: its `turn_id`, or one made for it (what `Agency.cancel` takes)."""
        self._cancelled: TurnCancelled | None = None

    def __aiter__(self) -> AsyncIterator[Event]:
        if self._generator is not None:
            raise RuntimeError("This stream was already iterated; call get_response_stream again for a new turn.")
        # drive's own generator, not one wrapped around it: every event would climb the extra level
        generator = drive(self._begin, self._mark_closed)
        # A weak reference only: when the caller's `async for` breaks, the generator is collected and
        # asyncio closes it, which cancels the turn.
        self._generator = weakref.ref(generator)
        return generator

    def _begin(self) -> Coroutine[Any, Any, object]:
        self._started = True
        return self._start(self)()

    def _mark_closed(self) -> None:
        self._finished = True
        if self._closed is not None:
            self._closed.set()

    async def _drain(self) -> RunResult:
        """The blocking form: the same turn, awaited (it emits nothing that `drive` would hand out)."""
        self._started = True
        try:
            await self._start(self)()
        finally:
            self._mark_closed()
        return self.result

    def _finish(self, result: RunResult) -> None:
        self._result = result

    @property
    def cancelled(self) -> bool:
        """The turn was cancelled: its last event was `cancelled`, and `result` raises TurnCancelled."""
        return self._cancelled is not None

    @property
    def result(self) -> RunResult:
        if self._cancelled is not None:
            raise self._cancelled
        if self._result is None:
            raise RuntimeError("The stream has no result yet: iterate it to the end first.")
        return self._result

    @property
    def done(self) -> bool:
        return self._finished

    async def aclose(self) -> None:
        """Stop the turn if it is still running and wait until it has been cleaned up and saved."""
        if self._generator is None:
            self._mark_closed()
            return
        generator = self._generator()
        if generator is not None:
            await generator.aclose()
        if not self._started:  # never iterated: nothing ran, nothing to clean up
            self._mark_closed()
        if not self._finished:  # the caller broke out; asyncio is closing the turn in another task
            self._closed = self._closed or asyncio.Event()
            await self._closed.wait()

    async def __aenter__(self) -> ResponseStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
