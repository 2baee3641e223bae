"""Prometheus metrics of turns and requests (the `metrics` extra: prometheus_client).

With several worker processes (`PROMETHEUS_MULTIPROC_DIR` set before the first import, as `serve --metrics` does)
every process writes its values to files there and `/metrics` sums them: the gauge of active turns sums the live
processes' values.

A turn's values are added up in memory and written to prometheus_client together (`_pending`): one interval
(`AGENCY_SWARM_METRICS_FLUSH_SECONDS`, 1 s by default) after the first value not written yet, before `/metrics`
renders, and at exit. A scrape sees its own process's values at once, another worker's up to one interval late.
"""

from __future__ import annotations

import atexit
import math
import os
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from .._model._prices import price_of
from .._model._usage import UsageTotals
from ._pending import Buffers, flush_interval

_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class Metrics:
    """The process's metrics (one instance per process: `metrics()`)."""

    def __init__(self) -> None:
        self.turns = Counter("agency_swarm_turns", "Top-level turns ended, by outcome.", ["outcome"])
        self.turn_seconds = Histogram(
            "agency_swarm_turn_duration_seconds", "Top-level turn latency, by entry agent.", ["agent"],
            buckets=_SECONDS,
        )
        self.active = Gauge("agency_swarm_active_turns", "Top-level turns running now.", multiprocess_mode="livesum")
        self.model_seconds = Histogram(
            "agency_swarm_model_call_duration_seconds", "Model call latency (retries included), by agent and model.",
            ["agent", "model"], buckets=_SECONDS,
        )
        self.model_errors = Counter("agency_swarm_model_call_errors", "Model calls that failed.", ["agent", "model"])
        self.tokens = Counter(
            "agency_swarm_tokens", "Tokens used, by agent, model and kind (input, output).", ["agent", "model", "kind"]
        )
        self.cost = Counter(
            "agency_swarm_cost_usd", "Estimated cost in USD (MODEL_PRICES), by agent and model; models without a "
            "price are not counted.", ["agent", "model"],
        )
        self.store_errors = Counter(
            "agency_swarm_store_errors", "Turns and requests that failed because the store did."
        )
        self.rejected = Counter(
            "agency_swarm_rejected_requests", "Requests answered 4xx, by reason (the error type).",
            ["reason"],
        )
        self.buffers = Buffers(flush_interval(os.environ))
        self._ended: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._called: dict[tuple[str, str], _ModelSeries] = {}
        """Each label set's series, looked up once (a series stays until the process ends)."""

    def turn_started(self) -> None:
        pending = self.buffers.pending()
        pending.add(self.active, 1)
        self.buffers.written(pending)

    def turn_ended(self, agent: str, outcome: str, seconds: float) -> None:
        series = self._ended.get((agent, outcome))
        if series is None:
            series = self._ended[(agent, outcome)] = (self.turns.labels(outcome), self.turn_seconds.labels(agent))
        pending = self.buffers.pending()
        pending.add(self.active, -1)
        pending.add(series[0], 1)
        pending.observe(series[1], seconds)
        self.buffers.written(pending)

    def model_called(self, agent: str, model: str, seconds: float, usage: Any, error: BaseException | None) -> None:
        series = self._called.get((agent, model))
        if series is None:
            series = self._called[(agent, model)] = _ModelSeries(self, agent, model)
        pending = self.buffers.pending()
        pending.observe(series.seconds, seconds)
        if error is not None:
            if series.errors is None:
                series.errors = self.model_errors.labels(agent, model)
            pending.add(series.errors, 1)
        if usage is not None:
            self._count_usage(pending, series, usage, (agent, model))
        self.buffers.written(pending)

    def _count_usage(self, pending: Any, series: _ModelSeries, usage: Any, labels: tuple[str, str]) -> None:
        """A call's tokens and cost; a count a model reported below zero (or not a number) is not counted: counters
        only go up."""
        input_tokens, output_tokens = _counted(usage.input_tokens), _counted(usage.output_tokens)
        if input_tokens:
            pending.add(series.input_tokens, input_tokens)
        if output_tokens:
            pending.add(series.output_tokens, output_tokens)
        price = price_of(labels[1])
        if price is None:
            return
        totals = UsageTotals()
        totals.add(usage)
        cost = _counted(price.of(totals))
        if series.cost is None:  # a model without a price has no cost series at all
            series.cost = self.cost.labels(*labels)
        if cost:
            pending.add(series.cost, cost)

    def flush(self) -> None:
        """This thread's pending values, written now."""
        self.buffers.flush()

    def request_failed(self, status: int, reason: str, *, store_error_counted: bool) -> None:
        """A 4xx response (rejected, by its error type), or a 503 because the store failed (counted once); written
        at once (rare, unlike a turn's values)."""
        if status < 500:
            self.rejected.labels(reason).inc()
        elif reason == "store_unavailable" and not store_error_counted:
            self.store_errors.inc()


def _counted(value: Any) -> float:
    """`value` when it is a finite number above zero, else 0."""
    if value.__class__ is int:
        return value if value > 0 else 0
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return value
    return 0


class _ModelSeries:
    """The series one agent's calls to one model count into."""

    __slots__ = ("cost", "errors", "input_tokens", "output_tokens", "seconds")

    def __init__(self, metrics: Metrics, agent: str, model: str) -> None:
        self.seconds = metrics.model_seconds.labels(agent, model)
        self.input_tokens = metrics.tokens.labels(agent, model, "input")
        self.output_tokens = metrics.tokens.labels(agent, model, "output")
        self.cost: Any = None
        self.errors: Any = None


_METRICS: Metrics | None = None


def metrics() -> Metrics:
    """This process's metrics, registered on first use; their pending values written at exit, and never by a forked
    child (the parent writes its own)."""
    global _METRICS
    if _METRICS is None:
        _METRICS = Metrics()
        atexit.register(_METRICS.buffers.flush_all_now)
        os.register_at_fork(after_in_child=_METRICS.buffers.forget)
    return _METRICS
