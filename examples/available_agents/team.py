"""The Manager and the workers it may be given. The Manager's prompt never names a worker: the library expands
{{AVAILABLE_AGENTS}} at every turn into `- Name: description`, one line per agent the chart lets it message."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agents import AgentHooks, Model, RunContextWrapper

from agency_swarm import Agency, Agent

MANAGER = "Manager"
MANAGER_INSTRUCTIONS = """You are the Manager of a team of agents. Read the user's request, choose the one agent
whose description fits it best, and give it the task with send_message; then answer the user with its result.

The agents you can message:
{{AVAILABLE_AGENTS}}

If none of them fits, say so and name the agents you have; never do a task yourself."""

WORKERS = {
    "Researcher": "A web researcher and fact-checker: searches the web, compares sources and verifies claims. "
    "Best for: current events, fact checks, background research. Avoid for: anything that needs code.",
    "Memory": "Keeps notes across the conversation: stores facts and recalls them on request. "
    "Best for: remembering preferences, names and decisions.",
    "Engineer": "A software engineer who writes and runs Python or Bash code: scripts, data processing, file "
    "handling, calculations. Avoid for: web research.",
}
"""Each worker's description: the one place that says what it does (its send_message entry and the Manager's
prompt both come from it)."""


class PromptLog(AgentHooks[Any]):
    """Keeps the system prompt of every model call, as the model received it (placeholders already expanded)."""

    def __init__(self) -> None:
        self.prompts: list[str | None] = []

    async def on_llm_start(self, context: RunContextWrapper[Any], agent: Any, system_prompt: str | None,
                           input_items: list[Any]) -> None:
        self.prompts.append(system_prompt)


def build_manager(model: Model | str, prompt_log: PromptLog) -> Agent:
    return Agent(name=MANAGER, instructions=MANAGER_INSTRUCTIONS, model=model, hooks=prompt_log)


def build_team(manager: Agent, members: Sequence[str], model_for: Callable[[str], Model | str]) -> Agency:
    """An agency in which `manager` may message exactly `members`. The same Manager can sit in several teams."""
    unknown = [name for name in members if name not in WORKERS]
    if unknown:
        raise ValueError(f"Unknown worker(s) {unknown}; the workers are: {', '.join(WORKERS)}.")
    workers = [
        Agent(name=name, description=WORKERS[name], model=model_for(name),
              instructions=f"You are the {name}. {WORKERS[name]} Do the task you are given and reply briefly.")
        for name in members
    ]
    return Agency(manager, communication_flows=[(manager, worker) for worker in workers])
