"""The default price table (USD per 1M tokens) that results, responses and metrics price usage with.

`MODEL_PRICES` holds OpenAI's list prices as published on `PRICES_AS_OF`; `set_model_price` adds or changes one.
A model the table does not hold is priced as unknown (None), never as free.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ._cost import ModelPrice

if TYPE_CHECKING:
    from ._usage import UsageTotals

PRICES_AS_OF = "2025-08-07"
"""The day the default prices were read from OpenAI's price list (standard tier, USD per 1M tokens)."""

MODEL_PRICES: dict[str, ModelPrice] = {
    "gpt-5": ModelPrice(input=1.25, output=10.0, cached_input=0.125),
    "gpt-5-mini": ModelPrice(input=0.25, output=2.0, cached_input=0.025),
    "gpt-5-nano": ModelPrice(input=0.05, output=0.4, cached_input=0.005),
    "gpt-4.1": ModelPrice(input=2.0, output=8.0, cached_input=0.5),
    "gpt-4.1-mini": ModelPrice(input=0.4, output=1.6, cached_input=0.1),
    "gpt-4.1-nano": ModelPrice(input=0.1, output=0.4, cached_input=0.025),
    "gpt-4o": ModelPrice(input=2.5, output=10.0, cached_input=1.25),
    "gpt-4o-mini": ModelPrice(input=0.15, output=0.6, cached_input=0.075),
    "o1": ModelPrice(input=15.0, output=60.0, cached_input=7.5),
    "o3": ModelPrice(input=2.0, output=8.0, cached_input=0.5),
    "o3-mini": ModelPrice(input=1.1, output=4.4, cached_input=0.55),
    "o4-mini": ModelPrice(input=1.1, output=4.4, cached_input=0.275),
}
"""Model name -> price per 1M tokens (USD). Change it in place, or with `set_model_price`; a dated snapshot name
(`gpt-4o-2024-08-06`) and a provider prefix (`openai/gpt-4o`) find the base model's price."""

_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")
_BASES: dict[str, str] = {}
"""Each model name seen without a price of its own -> its name without a provider prefix and a snapshot date (the
same every time: worked out once, not on every call)."""
_BASES_KEPT = 1024


def set_model_price(model: str, *, input: float, output: float, cached_input: float | None = None) -> None:
    """Price `model` (USD per 1M input, output and cached input tokens) in `MODEL_PRICES`, for every later turn."""
    MODEL_PRICES[model] = ModelPrice(input=input, output=output, cached_input=cached_input)


def model_price(model: str) -> ModelPrice | None:
    """The price `model` gets by default (USD per 1M tokens; OpenAI's list prices of `PRICES_AS_OF`, 2025-08-07,
    and whatever `set_model_price` added), or None when it has none."""
    return price_of(model)


def price_of(model: str, prices: Mapping[str, ModelPrice] | None = None) -> ModelPrice | None:
    """The price of `model` in `prices` (default `MODEL_PRICES`): by its name, else without a provider prefix and a
    snapshot date; None when unknown."""
    table = MODEL_PRICES if prices is None else prices
    found = table.get(model)
    if found is not None:
        return found
    base = _BASES.get(model)
    if base is None:
        base = _SNAPSHOT.sub("", model.rpartition("/")[2])
        if len(_BASES) >= _BASES_KEPT:
            _BASES.clear()
        _BASES[model] = base
    return table.get(base)


def priced(totals: Mapping[tuple[str, str], UsageTotals]) -> tuple[float | None, dict[str, float | None]]:
    """(the turn's cost, the cost per agent) in USD by `MODEL_PRICES`: None wherever a model that was called has no
    price (an unknown cost is not a zero one)."""
    by_agent: dict[str, float | None] = {}
    for (agent, model), usage in totals.items():
        price = price_of(model)
        known = by_agent.get(agent, 0.0)
        if price is None and usage.requests:
            by_agent[agent] = None
        elif known is not None:
            by_agent[agent] = known + (0.0 if price is None else price.of(usage))
    total: float | None = 0.0
    for amount in by_agent.values():
        total = None if amount is None or total is None else total + amount
    return total, by_agent
