"""Token usage: per-call counters summed per (agent, model), and `agents.Usage` objects built from them."""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable
from typing import Any

from agents import Usage
from agents.usage import RequestUsage
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails


def requests_of(usage: Any) -> int:
    """How many API requests one model call's usage stands for, as `Runner` counts them: an `agents.Usage` says so
    itself (a blocking call's); openai's `ResponseUsage` (a streamed call's) is one request; None is none."""
    if usage is None:
        return 0
    if isinstance(usage, Usage):
        return usage.requests or 0
    return 1  # not `getattr(usage, "requests", 1)`: a pydantic model's missing attribute costs an exception


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

    __slots__ = (
        "cache_write_tokens", "cached_tokens", "input_tokens", "output_tokens", "reasoning_tokens", "requests",
        "total_tokens",
    )

    def __init__(self) -> None:
        self.requests = self.input_tokens = self.output_tokens = self.total_tokens = 0
        self.cached_tokens = self.cache_write_tokens = self.reasoning_tokens = 0

    def add(self, usage: Any) -> None:
        """`usage` is an `agents.Usage` or an openai `ResponseUsage` (or None when the model reported none)."""
        self.requests += requests_of(usage)
        if usage is None:
            return
        self.input_tokens += usage.input_tokens or 0
        self.output_tokens += usage.output_tokens or 0
        self.total_tokens += usage.total_tokens or 0
        details = usage.input_tokens_details
        if details is not None:
            self.cached_tokens += details.cached_tokens or 0
            self.cache_write_tokens += getattr(details, "cache_write_tokens", 0) or 0
        out_details = usage.output_tokens_details
        if out_details is not None and out_details.reasoning_tokens:
            self.reasoning_tokens += out_details.reasoning_tokens

    @classmethod
    def sum(cls, parts: Collection[UsageTotals]) -> UsageTotals:
        if len(parts) == 1:  # one agent answered: its totals are the turn's
            return next(iter(parts))
        total = cls()
        for part in parts:
            for name in cls.__slots__:
                setattr(total, name, getattr(total, name) + getattr(part, name))
        return total

    def to_usage(self) -> Usage:
        """An `agents.Usage` with these sums (no per-request entries: `usage_of` adds those)."""
        usage = new_usage(self.requests, self.input_tokens, self.output_tokens, self.total_tokens)
        if self.cached_tokens or self.cache_write_tokens:
            usage.input_tokens_details = input_details(self.cached_tokens, self.cache_write_tokens)
        if self.reasoning_tokens:
            usage.output_tokens_details = OutputTokensDetails(reasoning_tokens=self.reasoning_tokens)
        return usage


def usage_of(usages: Iterable[Any]) -> Usage:
    """The `agents.Usage` that `Runner`'s run context holds after adding each of these model calls' usage, field by
    field: sums, cached and cache-write tokens, reasoning tokens, and one `request_usage_entries` entry per call."""
    totals = UsageTotals()
    entries: list[RequestUsage] = []
    for usage in usages:
        totals.add(usage)
        entries += request_entries(usage)
    summed = totals.to_usage()
    summed.request_usage_entries = entries
    return summed


def add_into(live: Usage, usage: Any) -> None:
    """Add one model call's usage to `live` in place, as `Usage.add` would (the SDK run context's usage, which tools
    and hooks may hold on to), without building an `agents.Usage` for the call first."""
    live.requests += requests_of(usage)
    if usage is None:
        return
    live.input_tokens += usage.input_tokens or 0
    live.output_tokens += usage.output_tokens or 0
    live.total_tokens += usage.total_tokens or 0
    details, was = usage.input_tokens_details, live.input_tokens_details
    cached = getattr(details, "cached_tokens", 0) or 0
    written = getattr(details, "cache_write_tokens", 0) or 0
    if cached or written:
        live.input_tokens_details = input_details(
            (was.cached_tokens or 0) + cached, (getattr(was, "cache_write_tokens", 0) or 0) + written
        )
    reasoning = getattr(usage.output_tokens_details, "reasoning_tokens", 0) or 0
    if reasoning:
        live.output_tokens_details = OutputTokensDetails(
            reasoning_tokens=(live.output_tokens_details.reasoning_tokens or 0) + reasoning
        )
    live.request_usage_entries += request_entries(usage)


def request_entries(usage: Any) -> list[RequestUsage]:
    """The `request_usage_entries` one model call adds, as `Usage.add` makes them: the call's own entries if it
    has any, else one entry when it is a single request that used tokens."""
    if usage is None:
        return []
    own = usage.request_usage_entries if isinstance(usage, Usage) else None  # openai's ResponseUsage has none
    if own:
        return copy.deepcopy(own)
    if requests_of(usage) != 1 or not (usage.input_tokens or usage.output_tokens or usage.total_tokens):
        return []
    details, out_details = usage.input_tokens_details, usage.output_tokens_details
    if details is None or details.cached_tokens is None or getattr(details, "cache_write_tokens", 0) is None:
        details = input_details(getattr(details, "cached_tokens", 0) or 0,
                                getattr(details, "cache_write_tokens", 0) or 0)
    if out_details is None or out_details.reasoning_tokens is None:
        out_details = OutputTokensDetails(reasoning_tokens=0)
    # Copies, as the SDK's entries hold their own; shallow ones (a deep copy costs ~3x more): nothing changes a
    # response's token details after the call.
    return [RequestUsage(
        input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, total_tokens=usage.total_tokens,
        input_tokens_details=details.model_copy(), output_tokens_details=out_details.model_copy(),
    )]


def input_details(cached_tokens: int, cache_write_tokens: int) -> InputTokensDetails:
    return InputTokensDetails.model_validate({"cached_tokens": cached_tokens, "cache_write_tokens": cache_write_tokens})


def new_usage(requests: int, input_tokens: int, output_tokens: int, total_tokens: int) -> Usage:
    """An `agents.Usage` with these counts and empty token details, as the SDK's constructor makes it."""
    return Usage(requests=requests, input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=total_tokens)
