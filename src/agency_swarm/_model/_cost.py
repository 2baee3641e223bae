"""Cost estimates: a turn's usage per agent and model, priced by a user-supplied table (per 1M tokens)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._base._errors import ConfigError

if TYPE_CHECKING:
    from ._usage import UsageTotals

_PER = 1_000_000


@dataclass(kw_only=True, frozen=True)
class ModelPrice:
    """One model's prices per 1M tokens, in your table's currency (provider price lists use USD)."""

    input: float
    """Per 1M input tokens that were not served from the prompt cache."""
    output: float
    """Per 1M output tokens (reasoning tokens are output tokens)."""
    cached_input: float | None = None
    """Per 1M input tokens served from the prompt cache; None: the `input` price."""

    def __post_init__(self) -> None:
        for name in ("input", "output", "cached_input"):
            value = getattr(self, name)
            if value is None and name == "cached_input":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
                raise ConfigError(f"ModelPrice: {name} must be a number >= 0 (price per 1M tokens), got {value!r}.")

    def of(self, totals: UsageTotals) -> float:
        cached = min(totals.cached_tokens, totals.input_tokens)
        cached_price = self.input if self.cached_input is None else self.cached_input
        return (
            (totals.input_tokens - cached) * self.input + cached * cached_price + totals.output_tokens * self.output
        ) / _PER


@dataclass(kw_only=True, frozen=True)
class CostEstimate:
    """What a turn cost: in all, per agent, per model (same currency as the price table)."""

    total: float
    by_agent: dict[str, float] = field(default_factory=dict)
    by_model: dict[str, float] = field(default_factory=dict)


def _price(model: str, price: Any) -> ModelPrice:
    if isinstance(price, ModelPrice):
        return price
    if isinstance(price, Mapping):
        unknown = set(price) - {"input", "output", "cached_input"}
        if unknown or not {"input", "output"} <= set(price):
            raise ConfigError(
                f"The price of model {model!r} must have 'input' and 'output' (and optionally 'cached_input'), "
                f"per 1M tokens; got keys {sorted(map(str, price))}."
            )
        return ModelPrice(**price)
    raise ConfigError(
        f"The price of model {model!r} must be a ModelPrice or a mapping with 'input' and 'output', "
        f"got {type(price).__name__}."
    )


def estimate_cost(
    usage: Mapping[tuple[str, str], UsageTotals], prices: Mapping[str, ModelPrice | Mapping[str, float]]
) -> CostEstimate:
    """Price `usage` ((agent, model name) -> totals) with `prices` (model name -> price per 1M tokens)."""
    if not isinstance(prices, Mapping):
        raise ConfigError(f"prices must map model names to ModelPrice, got {type(prices).__name__}.")
    missing = sorted({model for (_, model), totals in usage.items() if model not in prices and totals.requests})
    if missing:
        listing = ", ".join(repr(model) for model in missing)
        raise ConfigError(
            f"No price for model {listing}; add it to the table, e.g. prices[{missing[0]!r}] = "
            "ModelPrice(input=..., output=...) (per 1M tokens)."
        )
    table = {model: _price(model, price) for model, price in prices.items()}
    by_agent: dict[str, float] = {}
    by_model: dict[str, float] = {}
    for (agent, model), totals in usage.items():
        if model not in table:
            continue
        amount = table[model].of(totals)
        by_agent[agent] = by_agent.get(agent, 0.0) + amount
        by_model[model] = by_model.get(model, 0.0) + amount
    return CostEstimate(total=sum(by_agent.values()), by_agent=by_agent, by_model=by_model)
