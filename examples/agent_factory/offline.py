"""Scripted stand-ins for the models, so the example runs offline. Each script reads what its model was sent, as a
real model would: the coordinator follows the workflow on the replies it got, triage and planning match keywords,
the sub-agents pick their tools from the task's employee id and dates."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from agency_swarm.testing import ModelCall, ScriptedModel, Step, ToolCall, send_message

from .orchestration import COORDINATOR, PLANNER, REJECTION_TEMPLATE, REVIEWER, TRIAGE, Schemas
from .registry import SubAgentRegistry

KEYWORDS = {
    "leave": ("leave", "vacation", "days off", "holiday"),
    "payroll": ("pay", "salary", "payslip"),
    "benefits": ("benefit", "insurance", "dental", "health"),
}
"""What the scripted triage and planner look for; a real model reads the registry's descriptions instead."""

EMPLOYEE_ID = re.compile(r"\bE\d{3}\b")
ISO_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
SENTENCE_END = re.compile(r"(?<=[.?!])\s+")


def mentioned_keys(request: str, keys: list[str]) -> list[str]:
    """Registered keys whose keywords the request mentions, in the order the request mentions them."""
    text = request.lower()
    positions = {key: min((text.find(word) for word in KEYWORDS.get(key, ()) if word in text), default=-1)
                 for key in keys}
    return sorted((key for key, at in positions.items() if at >= 0), key=lambda key: positions[key])


def triage_script(keys: list[str]) -> Callable[[ModelCall], Step]:
    def triage(call: ModelCall) -> Step:
        chosen = mentioned_keys(call.last_user_message, keys)
        reason = "" if chosen else "it is not about leave, pay or benefits"
        return json.dumps({"should_reject": not chosen, "reject_reason": reason, "agents": chosen})

    return triage


def plan_script(keys: list[str]) -> Callable[[ModelCall], Step]:
    def plan(call: ModelCall) -> Step:
        request = call.last_user_message.partition("\n")[0].removeprefix("Request: ")
        who = f"Employee {_employee(request)}: "
        sentences = SENTENCE_END.split(request)
        steps = [{"agent": key, "task": who + " ".join(s for s in sentences if mentioned_keys(s, [key]))}
                 for key in mentioned_keys(request, keys)]
        return json.dumps({"steps": steps})

    return plan


def review_script(call: ModelCall) -> Step:
    failed = [line for line in call.last_user_message.splitlines() if "Error:" in line]
    return json.dumps({"approved": not failed, "issues": failed})


def worker_script(tools_for: Callable[[str], list[ToolCall]]) -> Callable[[ModelCall], Step]:
    """Call the tools the task asks for, one per model call, then answer with what they returned."""

    def work(call: ModelCall) -> Step:
        calls = tools_for(call.last_user_message)
        done = len(call.tool_outputs)
        return calls[done] if done < len(calls) else " ".join(call.tool_outputs)

    return work


def leave_tools(task: str) -> list[ToolCall]:
    employee = {"employee_id": _employee(task)}
    dates = ISO_DATE.findall(task)
    calls = [ToolCall("get_leave_balance", employee)]
    if len(dates) >= 2:
        booking = {**employee, "start_date": dates[0], "end_date": dates[1], "reason": "requested by the employee"}
        calls.append(ToolCall("submit_leave", booking))
    return calls


def _employee(task: str) -> str:
    found = EMPLOYEE_ID.search(task)
    return found.group() if found else "unknown"


WORKER_TOOLS: dict[str, Callable[[str], list[ToolCall]]] = {
    "leave": leave_tools,
    "payroll": lambda task: [ToolCall("latest_pay_stub", {"employee_id": _employee(task)})],
    "benefits": lambda task: [ToolCall("list_benefits", {"employee_id": _employee(task)})],
}


class CoordinatorScript:
    """The workflow as a model would follow it: its step is chosen by how many replies the turn has so far."""

    def __init__(self, registry: SubAgentRegistry, schemas: Schemas) -> None:
        self.registry, self.schemas = registry, schemas

    def __call__(self, call: ModelCall) -> Step:
        request, replies = call.last_user_message, call.tool_outputs
        if not replies:
            return send_message(TRIAGE, request)
        try:
            decision = self.schemas.triage.model_validate_json(replies[0])
            if decision.should_reject:
                return REJECTION_TEMPLATE.format(domain_name=self.registry.domain_name, reason=decision.reject_reason)
            if len(replies) == 1:
                return send_message(PLANNER, f"Request: {request}\nAgents chosen by triage: {decision.agents}")
            plan = self.schemas.plan.model_validate_json(replies[1])
        except ValidationError:
            return f"Sorry, I could not handle your request: {replies[-1]}"
        return self._execute(request, plan.steps, replies[2:])

    def _execute(self, request: str, steps: list[Any], results: list[str]) -> Step:
        if len(results) < len(steps):
            step = steps[len(results)]
            return send_message(self.registry.config(step.agent).name, step.task)
        names = [self.registry.config(step.agent).name for step in steps]
        lines = [f"- {name}: {reply}" for name, reply in zip(names, results, strict=False)]
        if len(results) == len(steps):
            return send_message(REVIEWER, f"Request: {request}\nReplies:\n" + "\n".join(lines))
        review = self.schemas.review.model_validate_json(results[-1])
        verdict = "The review approved it." if review.approved else f"The review found: {'; '.join(review.issues)}"
        return "Here is what was done:\n" + "\n".join(lines) + f"\n{verdict}"


def scripted_models(registry: SubAgentRegistry) -> dict[str, ScriptedModel]:
    """One scripted model per agent name."""
    keys, schemas = registry.agent_keys, Schemas.for_registry(registry)
    models = {
        COORDINATOR: ScriptedModel(CoordinatorScript(registry, schemas), name="coordinator-script"),
        TRIAGE: ScriptedModel(triage_script(keys), name="triage-script"),
        PLANNER: ScriptedModel(plan_script(keys), name="plan-script"),
        REVIEWER: ScriptedModel(review_script, name="review-script"),
    }
    for key in keys:
        name = registry.config(key).name
        models[name] = ScriptedModel(worker_script(WORKER_TOOLS.get(key, lambda task: [])), name=f"{key}-script")
    return models
