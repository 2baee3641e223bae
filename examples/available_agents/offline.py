"""Scripted stand-ins for the models, so the example runs offline. The Manager's script knows no worker by name:
like a real model it picks one from the agent list in the instructions it receives."""

from __future__ import annotations

import re

from agency_swarm.testing import ModelCall, ScriptedModel, Step, send_message

from .team import MANAGER, WORKERS

LISTED_AGENT = re.compile(r"^- ([^:\n]+): (.+)$", re.MULTILINE)
_WORD = re.compile(r"[a-z]{4,}")
_COMMON = {"that", "this", "with", "from", "what", "which", "your", "have", "best", "avoid", "anything", "needs"}


def _words(text: str) -> set[str]:
    return {word.removesuffix("s") for word in _WORD.findall(text.lower())} - _COMMON


def listed_agents(instructions: str) -> dict[str, str]:
    """The `- Name: description` lines of the instructions."""
    return dict(LISTED_AGENT.findall(instructions))


def best_fit(request: str, agents: dict[str, str]) -> str | None:
    """The listed agent whose description shares the most words with the request; None if no word is shared."""
    scores = {name: len(_words(request) & _words(description)) for name, description in agents.items()}
    best = max(scores, key=lambda name: scores[name], default=None)
    return best if best is not None and scores[best] > 0 else None


def manager(call: ModelCall) -> Step:
    if call.tool_outputs:
        return f"Done. {call.tool_outputs[-1]}"
    agents = listed_agents(call.system_instructions or "")
    chosen = best_fit(call.last_user_message, agents)
    if chosen is None:
        names = ", ".join(agents) or "none"
        return f"None of the agents I can message fits this request (I have: {names})."
    return send_message(chosen, call.last_user_message)


WORKER_REPLIES = {
    "Researcher": "Three independent sources agree on it; details and links are in my notes.",
    "Memory": "Noted; I will remember it.",
    "Engineer": "count_lines.py: `import sys; print(sum(1 for _ in open(sys.argv[1])))`; run it as "
    "`python count_lines.py report.txt`.",
}


def scripted_models() -> dict[str, ScriptedModel]:
    models = {MANAGER: ScriptedModel(manager, name="manager-script")}
    for name in WORKERS:
        models[name] = ScriptedModel(lambda call, name=name: f"{name}: {WORKER_REPLIES[name]}", name=f"{name}-script")
    return models
