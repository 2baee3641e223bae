"""Token usage: per-call counters summed per (agent, model), and `agents.Usage` objects built from them."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from agents import Usage
from openai.types.responses import ResponseUsage
from openai.types.responses.response_usage import OutputTokensDetails

from .._base import _sdk


def requests_of(usage: Any) -> int:
    """How many API requests one model response's usage stands for."""
    # A streamed response's usage (ResponseUsage) is one request; asking that pydantic model for the attribute
    # it lacks would cost ~2 µs.
    if usage is None or type(usage) is ResponseUsage:
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


def _sdk_usage(requests: int, input_tokens: int, output_tokens: int, total_tokens: int) -> Usage:
    return Usage(requests=requests, input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=total_tokens)


_ZERO_USAGE = Usage()
_new = object.__new__


def _filled_usage(requests: int, input_tokens: int, output_tokens: int, total_tokens: int) -> Usage:
    """The `agents.Usage` the constructor would build, attribute for attribute, without its validation.

    `Usage(...)` validates every field (~5 µs); a tool's first call in a turn needs one for its context.
    """
    usage: Usage = _new(Usage)
    usage.__dict__ = {
        **_ZERO_USAGE.__dict__,
        "requests": requests, "input_tokens": input_tokens, "output_tokens": output_tokens,
        "total_tokens": total_tokens, "input_tokens_details": _fresh(_ZERO_USAGE.input_tokens_details),
        "output_tokens_details": _fresh(_ZERO_USAGE.output_tokens_details), "request_usage_entries": [],
    }
    return usage


def _fresh(details: Any) -> Any:
    """A new token-details model equal to `details`, with the same fields set (half what copying it costs)."""
    return details.__pydantic_validator__.validate_python(
        {name: getattr(details, name) for name in details.__pydantic_fields_set__}
    )


def _fills_like_the_sdk() -> bool:
    """Whether `_filled_usage` still matches this SDK version's constructor (else the constructor is used)."""
    try:
        filled, made = _filled_usage(2, 3, 4, 7), _sdk_usage(2, 3, 4, 7)
        return vars(filled) == vars(made) and all(
            getattr(filled, name).__pydantic_fields_set__ == getattr(made, name).__pydantic_fields_set__
            for name in ("input_tokens_details", "output_tokens_details")
        )
    except Exception:  # pragma: no cover - depends on the installed SDK
        return False


_FILLS_USAGE = _fills_like_the_sdk()


def new_usage(requests: int, input_tokens: int, output_tokens: int, total_tokens: int) -> Usage:
    """An `agents.Usage` with these counts and empty token details (hand-filled unless `_sdk.SHORTCUTS` is off)."""
    if _sdk.SHORTCUTS and _FILLS_USAGE:
        return _filled_usage(requests, input_tokens, output_tokens, total_tokens)
    return _sdk_usage(requests, input_tokens, output_tokens, total_tokens)
