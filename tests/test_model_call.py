"""One model-call path: a streamed call gives the hooks and usage what a blocking call gives."""

from __future__ import annotations

from typing import Any

import pytest
from agents import AgentHooks, ModelResponse, Usage
from openai.types.responses import ResponseUsage
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from agency_swarm import Agency, Agent
from agency_swarm.testing import ScriptedModel


def _cached(tokens: int) -> InputTokensDetails:
    fields = {name: 0 for name in ("cached_tokens", "cache_write_tokens") if name in InputTokensDetails.model_fields}
    return InputTokensDetails.model_validate({**fields, "cached_tokens": tokens})


class Detailed(ScriptedModel):
    """Reports cached and reasoning tokens, blocking and streamed alike."""

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        response = await super().get_response(*args, **kwargs)
        response.usage = Usage(
            requests=1, input_tokens=10, output_tokens=5, total_tokens=15,
            input_tokens_details=_cached(3),
            output_tokens_details=OutputTokensDetails(reasoning_tokens=2),
        )
        return response

    def _usage(self) -> ResponseUsage:
        return ResponseUsage(
            input_tokens=10, input_tokens_details=_cached(3), output_tokens=5,
            output_tokens_details=OutputTokensDetails(reasoning_tokens=2), total_tokens=15,
        )


class Seen(AgentHooks[Any]):
    def __init__(self) -> None:
        self.usages: list[tuple[int, int, int, int, int]] = []

    async def on_llm_end(self, context: Any, agent: Any, response: ModelResponse) -> None:
        usage = response.usage
        self.usages.append((
            usage.requests, usage.input_tokens, usage.output_tokens, usage.input_tokens_details.cached_tokens,
            usage.output_tokens_details.reasoning_tokens,
        ))


@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
async def test_on_llm_end_and_usage_keep_token_details_in_both_modes(streaming: bool) -> None:
    hooks = Seen()
    agency = Agency(Agent(name="Solo", model=Detailed(["hi"]), hooks=hooks))
    if streaming:
        stream = agency.get_response_stream("hello")
        async for _ in stream:
            pass
        result = stream.result
    else:
        result = await agency.get_response("hello")
    assert hooks.usages == [(1, 10, 5, 3, 2)]
    usage = result.usage
    assert (usage.input_tokens_details.cached_tokens, usage.output_tokens_details.reasoning_tokens) == (3, 2)
