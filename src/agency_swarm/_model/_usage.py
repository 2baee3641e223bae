"""Token usage: per-call counters summed per (agent, model), and `agents.Usage` objects built from them."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from agents import Usage
from openai.types.responses.response_usage import OutputTokensDetails


def requests_of(usage: Any) -> int:
    """How many API requests one model response's usage stands for."""
    if usage is None:
        return 1
    return max(1, getattr(usage, "requests", 1) or 1)


def totals_by_model(records: Iterable[tuple[tuple[str, str], Any]]) -> dict[tuple[str, str], UsageTotals]:
    """Each model call's usage summed under its (agent, model name)."""
    totals: dict[tuple[str, str], UsageTotals] = {}
    for key, usage in records:
        per_model = totals.get(key)
        if per_model is None:
            per_model = totals[key] = UsageTotals()
        per_model.add(usage)
    return totals


class UsageTotals:
    """Plain-int counters: adding to `agents.Usage` per model call costs ~10 µs, this costs ~1 µs."""

    __slots__ = ("cached_tokens", "input_tokens", "output_tokens", "reasoning_tokens", "requests", "total_tokens")

    def __init__(self) -> None:
        self.requests = self.input_tokens = self.output_tokens = self.total_tokens = 0
        self.cached_tokens = self.reasoning_tokens = 0

    def add(self, usage: Any) -> None:
        """`usage` is an `agents.Usage` or an openai `ResponseUsage` (or None when the model reported none)."""
        self.requests += requests_of(usage)
        if usage is None:
            return
        self.input_tokens += usage.input_tokens or 0
        self.output_tokens += usage.output_tokens or 0
        self.total_tokens += usage.total_tokens or 0
        details = usage.input_tokens_details
        if details is not None and details.cached_tokens:
            self.cached_tokens += details.cached_tokens
        out_details = usage.output_tokens_details
        if out_details is not None and out_details.reasoning_tokens:
            self.reasoning_tokens += out_details.reasoning_tokens

    @classmethod
    def sum(cls, parts: Collection[UsageTotals]) -> UsageTotals:
        if len(parts) == 1:  # one agent answered: its totals are the turn's
            return next(iter(parts))
        total = cls()
        for part in parts:
            total.requests += part.requests
            total.input_tokens += part.input_tokens
            total.output_tokens += part.output_tokens
            total.total_tokens += part.total_tokens
            total.cached_tokens += part.cached_tokens
            total.reasoning_tokens += part.reasoning_tokens
        return total

    def to_usage(self) -> Usage:
        usage = new_usage(self.requests, self.input_tokens, self.output_tokens, self.total_tokens)
        if self.cached_tokens:
            usage.input_tokens_details = usage.input_tokens_details.model_copy(
                update={"cached_tokens": self.cached_tokens}
            )
        if self.reasoning_tokens:
            usage.output_tokens_details = OutputTokensDetails(reasoning_tokens=self.reasoning_tokens)
        return usage


def new_usage(requests: int, input_tokens: int, output_tokens: int, total_tokens: int) -> Usage:
    """An `agents.Usage` with these counts and empty token details, as the SDK's constructor makes it."""
    return Usage(requests=requests, input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=total_tokens)
