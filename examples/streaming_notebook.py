"""Streaming, notebook style: open as cells (`# %%`) in Jupyter or VS Code, or run it as a plain script."""

# %% Set-up: a Lead who asks an Analyst, who counts words with a tool. Scripted models keep it offline.
import asyncio

import agents

from agency_swarm import Agency, Agent, AgentFinished, MessageSent, RunResult, TextDelta, ToolCalled, function_tool
from agency_swarm.testing import ScriptedModel, ToolCall, send_message

agents.set_tracing_disabled(True)  # nothing to export offline


@function_tool
async def count_words(text: str) -> str:
    """Count the words of a text."""
    return str(len(text.split()))


lead = Agent(
    name="Lead",
    instructions="Ask the Analyst, then answer the user.",
    model=ScriptedModel.each_turn([send_message("Analyst", "Count the words of the question."), "That is 5 words."]),
)
analyst = Agent(
    name="Analyst",
    description="Counts things.",
    tools=[count_words],
    model=ScriptedModel.each_turn([ToolCall("count_words", {"text": "agents that talk to agents"}), "It has 5 words."]),
)
agency = Agency([lead, [lead, analyst]])


# %% Stream a turn: every event names its agent, caller, depth (0 = the entry agent) and chat id.
async def show(message: str, chat_id: str) -> RunResult:
    stream = agency.get_response_stream(message, chat_id=chat_id)
    speaking: str | None = None  # the agent whose text deltas are being printed on the current line
    async for event in stream:
        pad = "  " * event.depth
        if isinstance(event, TextDelta):
            if speaking != event.agent:
                print(f"{pad}{event.agent}: ", end="")
                speaking = event.agent
            print(event.delta, end="", flush=True)
            continue
        if isinstance(event, (MessageSent, ToolCalled, AgentFinished)) and speaking is not None:
            print()
            speaking = None
        if isinstance(event, MessageSent):
            print(f"{pad}{event.agent} -> {event.recipient}: {event.message}")
        elif isinstance(event, ToolCalled):
            print(f"{pad}{event.agent} calls {event.tool}({event.arguments})")
    return stream.result


# A notebook already runs an event loop: there, write `result = await show(...)` in a cell instead.
result = asyncio.run(show("How many words in 'agents that talk to agents'?", chat_id="notebook"))
print("streamed final output:", result.final_output)

# %% The blocking form works in scripts and inside a notebook's running loop alike.
result = agency.get_response_sync("And once more?", chat_id="notebook")
print("sync final output:", result.final_output)
print("usage:", result.usage.requests, "requests,", result.usage.total_tokens, "tokens")

# %% Threads are kept per chat and per sender->recipient pair.
for key, items in agency.thread_manager.get_threads("notebook").items():
    print(f"{key}: {len(items)} items")
