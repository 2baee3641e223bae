"""Scripted stand-ins for the four models, so the example runs offline. Like real models they only use what they
are sent: the planner and verifier read the memory in their instructions, the executor reads its message, and the
solver reads the replies in its history."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from agency_swarm.testing import ModelCall, ScriptedModel, Step, ToolCall, send_message

from .team import EXECUTOR, PLANNER, SOLVER, VERIFIER, NextStep, Verdict

POPULATION = re.compile(r"Population: ([\d,]+)")
AREA = re.compile(r"land area of ([\d,]+) square kilometres")
CALCULATED = re.compile(r"calculator\(.*\) -> .* = ")
ATTACHMENT = re.compile(r"\[attachment (att_[0-9a-f]{12}):")
FLAGS = {hashlib.sha256((Path(__file__).parent / "flag.png").read_bytes()).hexdigest(): "Lumaria"}
"""The flags these stand-ins recognise (by their bytes: a real model would look at the picture)."""


def images(call: ModelCall) -> list[bytes]:
    """The bytes of every image the model was sent (as data URLs)."""
    found = []
    for item in call.input:
        for part in item.get("content") if isinstance(item.get("content"), list) else []:
            url = part.get("image_url") if isinstance(part, dict) and part.get("type") == "input_image" else None
            if isinstance(url, str) and url.startswith("data:"):
                found.append(base64.b64decode(url.partition(",")[2]))
    return found


def _country(call: ModelCall) -> str:
    """The country the question is about: the one whose flag was sent, else the one it names."""
    for image in images(call):
        country = FLAGS.get(hashlib.sha256(image).hexdigest())
        if country is not None:
            return country
    return "Lumaria"


def _memory(call: ModelCall) -> str:
    return (call.system_instructions or "").partition("so far:\n")[2] or (call.system_instructions or "")


def planner(call: ModelCall) -> Step:
    """Find the population, then the area, then divide: the steps a density question needs."""
    memory, country = _memory(call), _country(call)
    population, area = POPULATION.search(memory), AREA.search(memory)
    if population is None:
        step = (f"Find {country}'s population.", "search", f"{country} population", "Nothing is known yet.")
    elif area is None:
        step = (f"Find {country}'s land area.", "search", f"{country} land area square kilometres",
                f"Population: {population[1]}.")
    else:
        numbers = f"{population[1]} / {area[1]}".replace(",", "")
        step = ("Divide the population by the land area.", "calculator", numbers,
                f"Population {population[1]}, area {area[1]} km2.")
    sub_goal, tool, tool_input, context = step
    return NextStep(justification=f"Needed for the density: {sub_goal.lower()}", context=context,
                    sub_goal=sub_goal, tool_name=tool, tool_input=tool_input).model_dump_json()


def executor(call: ModelCall) -> Step:
    if call.tool_outputs:
        return f"{_field(call.last_user_message, 'Tool')} returned: {call.tool_outputs[-1]}"
    tool, tool_input = _field(call.last_user_message, "Tool"), _field(call.last_user_message, "Input")
    return ToolCall(tool, {"expression" if tool == "calculator" else "query": tool_input})


def _field(message: str, name: str) -> str:
    found = re.search(rf"^{name}: (.*)$", message, re.MULTILINE)
    return found[1] if found else ""


def verifier(call: ModelCall) -> Step:
    memory = call.system_instructions or ""
    if CALCULATED.search(memory):
        verdict = Verdict(analysis="The memory has the population, the area and their quotient.", conclusion="STOP")
    else:
        verdict = Verdict(analysis="The density still needs to be computed.", conclusion="CONTINUE")
    return verdict.model_dump_json()


def solver(call: ModelCall) -> Step:
    """Planner -> Executor -> Verifier, again until STOP; picks its move from the reply it got last."""
    question = _first_user_message(call)
    shown = ATTACHMENT.findall(json.dumps(call.input)) or None  # an image the user sent: every agent gets it
    if call.last_user_message.startswith("Stop now"):
        return f"Stopped early; best answer so far: {_last_reply(call, EXECUTOR) or 'nothing was found'}"
    last = _last_send(call)
    if last is None or (last[0] == VERIFIER and Verdict.model_validate_json(last[1]).conclusion == "CONTINUE"):
        return send_message(PLANNER, f"Question: {question}\nWhat is the next step?", None, shown)
    recipient, reply = last
    if recipient == PLANNER:
        step = NextStep.model_validate_json(reply)
        return send_message(EXECUTOR, f"Sub-goal: {step.sub_goal}\nTool: {step.tool_name}\n"
                                      f"Input: {step.tool_input}\nContext: {step.context}", None, shown)
    if recipient == EXECUTOR:
        return send_message(VERIFIER, f"Question: {question}\nIs it answered now?", None, shown)
    return _last_reply(call, EXECUTOR) or "Nothing was found."  # the answer itself: main.py labels it


def _sends(call: ModelCall) -> list[tuple[str, str]]:
    """(recipient, reply) of every send_message in the history that has a reply, oldest first."""
    recipients: dict[str, str] = {}
    sends: list[tuple[str, str]] = []
    for item in call.input:
        if item.get("type") == "function_call" and item.get("name") == "send_message":
            arguments: dict[str, Any] = json.loads(item["arguments"])
            recipients[item["call_id"]] = arguments["recipient_agent"]
        elif item.get("type") == "function_call_output" and item["call_id"] in recipients:
            sends.append((recipients[item["call_id"]], str(item["output"])))
    return sends


def _last_send(call: ModelCall) -> tuple[str, str] | None:
    sends = [send for send in _sends(call) if not send[1].startswith("Error:")]
    return sends[-1] if sends and call.tool_outputs else None


def _last_reply(call: ModelCall, agent: str) -> str | None:
    replies = [reply for recipient, reply in _sends(call) if recipient == agent and not reply.startswith("Error:")]
    return replies[-1] if replies else None


def _first_user_message(call: ModelCall) -> str:
    first = next((item["content"] for item in call.input if item.get("role") == "user"), "")
    if isinstance(first, str):
        return first
    return "\n".join(part["text"] for part in first if part.get("type") == "input_text"
                     and not ATTACHMENT.match(part["text"]))


def scripted_models() -> dict[str, ScriptedModel]:
    return {
        SOLVER: ScriptedModel(solver, name="solver-script"),
        PLANNER: ScriptedModel(planner, name="planner-script"),
        EXECUTOR: ScriptedModel(executor, name="executor-script"),
        VERIFIER: ScriptedModel(verifier, name="verifier-script"),
    }
