"""Reference system 1 (examples/agent_factory): registry-built agents, run-time plan schema, the whole workflow."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from agency_swarm import MessageSent, RunResult
from agency_swarm.testing import ScriptedModel

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "examples") not in sys.path:
    sys.path.insert(0, str(ROOT / "examples"))  # the reference systems are packages under examples/

from agent_factory import config, hr_tools, offline  # noqa: E402
from agent_factory import main as app  # noqa: E402
from agent_factory.orchestration import (  # noqa: E402
    COORDINATOR,
    PLANNER,
    TRIAGE,
    Schemas,
    build_agency,
    create_plan_schema,
)
from agent_factory.registry import SubAgentRegistry  # noqa: E402


class Ticks:
    """A clock that advances one second per reading: exact timings, no sleeping."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def recipients(outcome: app.Outcome) -> list[str]:
    return [event.recipient for event in outcome.events if isinstance(event, MessageSent)]


async def run(request: str, **overrides: ScriptedModel) -> app.Outcome:
    registry = app.default_registry()
    models = {**offline.scripted_models(registry), **overrides}
    return await app.run(request, registry=registry, models=models, out=io.StringIO(), clock=Ticks())


# -- the registry and what is generated from it ----------------------------------------------------------


def test_plan_schema_accepts_registered_keys_and_rejects_any_other() -> None:
    plan = create_plan_schema(["leave", "payroll"])
    ok = plan.model_validate({"steps": [{"agent": "payroll", "task": "t"}, {"agent": "leave", "task": "u"}]})
    assert [step.agent for step in ok.steps] == ["payroll", "leave"]
    with pytest.raises(ValidationError, match=r"Input should be 'leave' or 'payroll'"):
        plan.model_validate({"steps": [{"agent": "it-support", "task": "reset my password"}]})
    step_schema = plan.model_json_schema()["$defs"]["PlanStep"]
    assert step_schema["properties"]["agent"]["enum"] == ["leave", "payroll"]


def test_registering_an_agent_changes_prompts_schemas_and_chart_without_editing_them() -> None:
    async def list_courses(ctx: object, employee_id: str) -> str:
        return f"{employee_id}: no courses"

    training = config.SubAgentConfig(
        key="training", name="training-agent", description="Handles training courses.",
        capabilities=["List an employee's courses"],
        tools=[config.ToolConfig(name="list_courses", description="Courses of an employee.")],
    )
    registry = SubAgentRegistry(
        domain_name="HR", domain_description="HR things.", sub_agents=[*config.SUB_AGENTS, training],
        tool_functions={**hr_tools.TOOL_FUNCTIONS, "list_courses": list_courses},
    )
    assert registry.agent_keys == ["leave", "payroll", "benefits", "training"]
    assert "- **training** (training-agent): Handles training courses.\n  - List an employee's courses" in (
        registry.describe()
    )
    assert "  - tool `list_courses`: Courses of an employee." in registry.describe(with_tools=True)
    agency = build_agency(registry, lambda name: "unused-model-name")
    assert (COORDINATOR, "training-agent") in agency.communication_flows
    assert "training-agent" in str(agency.agents[COORDINATOR].instructions)
    assert [tool.name for tool in agency.agents["training-agent"].tools] == ["list_courses"]
    schemas = Schemas.for_registry(registry)
    assert schemas.plan.model_validate({"steps": [{"agent": "training", "task": "x"}]}).steps[0].agent == "training"
    triage_keys = schemas.triage.model_json_schema()["properties"]["agents"]["items"]["enum"]
    assert triage_keys == ["leave", "payroll", "benefits", "training"]


def test_registry_rejects_duplicate_keys_and_tools_without_a_function() -> None:
    leave = config.SUB_AGENTS[0]
    with pytest.raises(ValueError, match="Two sub-agents have the key 'leave'"):
        SubAgentRegistry(domain_name="HR", domain_description="d", sub_agents=[leave, leave],
                         tool_functions=hr_tools.TOOL_FUNCTIONS)
    with pytest.raises(ValueError, match="lists tool 'submit_leave', which has no function"):
        SubAgentRegistry(domain_name="HR", domain_description="d", sub_agents=[leave],
                         tool_functions={"get_leave_balance": hr_tools.get_leave_balance})
    with pytest.raises(ValidationError, match="key"):
        config.SubAgentConfig(key="Bad Key", name="x", description="d", capabilities=[])


# -- the workflow ------------------------------------------------------------------------------------------


async def test_triage_plan_execute_review_summary_in_the_plans_order() -> None:
    outcome = await run(app.DEFAULT_REQUEST)
    # the request mentions pay before leave, so the plan runs payroll first, then leave
    assert recipients(outcome) == ["triage-agent", "plan-agent", "payroll-agent", "leave-agent", "review-agent"]
    threads = outcome.agency.thread_manager.get_threads(outcome.result.chat_id)
    assert set(threads) == {
        "user->coordinator", "coordinator->triage-agent", "coordinator->plan-agent", "coordinator->payroll-agent",
        "coordinator->leave-agent", "coordinator->review-agent",
    }
    first = threads["coordinator->payroll-agent"][0]
    sends = {item["call_id"] for item in threads["user->coordinator"] if item.get("type") == "function_call"}
    assert first == {
        "role": "user", "content": "Employee E100: What was on my last pay stub?", "send_call_id": first["send_call_id"]
    }
    assert first["send_call_id"] in sends
    # the sub-agents' tools really ran against the run's database
    [booking] = outcome.database.bookings
    assert (booking.employee_id, str(booking.start), str(booking.end), booking.days) == (
        "E100", "2025-07-14", "2025-07-18", 5
    )
    assert outcome.database.employees["E100"].leave_days == 7
    summary = outcome.result.final_output
    assert "payroll-agent: Latest pay stub of Dana Whitfield: 2025-06-30" in summary
    assert "leave-agent: Dana Whitfield (E100) has 12 leave days left. Booked 5 working days" in summary
    assert summary.endswith("The review approved it.")


async def test_every_agent_turn_is_timed_from_the_stream() -> None:
    outcome = await run(app.DEFAULT_REQUEST)
    timings = [(t.agent, t.caller, t.depth, t.started_at, t.finished_at) for t in outcome.observer.timings]
    # one clock reading per agent_started and per agent_finished, in stream order
    assert timings == [
        ("coordinator", "user", 0, 1.0, 12.0),
        ("triage-agent", "coordinator", 1, 2.0, 3.0),
        ("plan-agent", "coordinator", 1, 4.0, 5.0),
        ("payroll-agent", "coordinator", 1, 6.0, 7.0),
        ("leave-agent", "coordinator", 1, 8.0, 9.0),
        ("review-agent", "coordinator", 1, 10.0, 11.0),
    ]
    report = outcome.observer.report()
    assert "  coordinator    11000.0 ms" in report
    assert "    leave-agent    1000.0 ms" in report


async def test_prompts_and_output_schemas_the_models_received_come_from_the_registry() -> None:
    registry = app.default_registry()
    models = offline.scripted_models(registry)
    await app.run(app.DEFAULT_REQUEST, registry=registry, models=models, out=io.StringIO())
    coordinator_call = models[COORDINATOR].calls[0]
    assert registry.describe() in str(coordinator_call.system_instructions)
    plan_call = models[PLANNER].calls[0]
    assert registry.describe(with_tools=True) in str(plan_call.system_instructions)
    assert plan_call.output_schema is not None
    schema = plan_call.output_schema.json_schema()
    assert schema["$defs"]["PlanStep"]["properties"]["agent"]["enum"] == ["leave", "payroll", "benefits"]
    triage_call = models[TRIAGE].calls[0]
    assert triage_call.output_schema is not None
    assert triage_call.output_schema.json_schema()["properties"]["agents"]["items"]["enum"] == [
        "leave", "payroll", "benefits"
    ]
    # sub-agents get their config's tools (with the config's descriptions), orchestrators get none but send_message
    leave_call = models["leave-agent"].calls[0]
    assert leave_call.tool_names == ["get_leave_balance", "submit_leave"]
    assert leave_call.tools[1].description == "Book leave (ISO dates, both included) with a reason."
    assert coordinator_call.tool_names == ["send_message"]


async def test_a_plan_naming_an_unregistered_agent_is_rejected_and_nothing_runs() -> None:
    rogue = json.dumps({"steps": [{"agent": "it-support", "task": "reset my password"}]})
    outcome = await run(app.DEFAULT_REQUEST, **{PLANNER: ScriptedModel([rogue])})
    assert recipients(outcome) == ["triage-agent", "plan-agent"]
    answer = outcome.result.final_output
    assert answer.startswith("Sorry, I could not handle your request: Error: plan-agent failed to answer: ")
    assert "OutputValidationError: Agent 'plan-agent' answered with output that does not match its output_type" in (
        answer
    )
    plan_timing = outcome.observer.timings[2]
    assert (plan_timing.agent, plan_timing.finished_at, plan_timing.seconds) == ("plan-agent", None, None)
    assert ["plan-agent", "did", "not", "finish"] in [line.split() for line in outcome.observer.report().splitlines()]
    assert outcome.database.bookings == []


async def test_out_of_scope_request_is_rejected_by_triage() -> None:
    outcome = await run("Write me a poem about the sea.")
    assert recipients(outcome) == ["triage-agent"]
    assert outcome.result.final_output == (
        "Sorry, HR Assistant cannot help with that: it is not about leave, pay or benefits"
    )


async def test_a_failing_tool_reaches_the_review_and_the_summary() -> None:
    outcome = await run("I'm E200; please book leave from 2025-07-14 to 2025-07-18.")
    assert recipients(outcome) == ["triage-agent", "plan-agent", "leave-agent", "review-agent"]
    assert outcome.database.bookings == []
    summary = outcome.result.final_output
    assert "Error: tool 'submit_leave' failed: ValueError: 5 working days requested but only 2 left" in summary
    assert "The review found: - leave-agent:" in summary


def test_main_runs_offline_in_one_command() -> None:
    env = {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"}
    done = subprocess.run(
        [sys.executable, "examples/agent_factory/main.py", "--request", "What benefits do I have? I am E100."],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines[0] == "Using scripted offline models (set OPENAI_API_KEY to use a real model)"
    assert "  [agent_started]  benefits-agent (asked by coordinator)" in lines
    assert "coordinator: Here is what was done:" in lines
    assert "- benefits-agent: Dana Whitfield is enrolled in: Health (family), Dental basic." in lines
    assert "Timings (agent_started -> agent_finished):" in lines


def test_main_uses_the_real_model_when_a_key_is_set(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "offline-test-value-never-printed")
    seen: dict[str, object] = {}

    async def fake_run(request: str, **kwargs: object) -> RunResult | None:
        seen.update(kwargs, request=request)
        return None

    monkeypatch.setattr(app, "run", fake_run)
    assert app.main(["--request", "hi"]) == 0
    out = capsys.readouterr().out
    assert out == "Using OpenAI model gpt-4.1-mini (OPENAI_API_KEY is set)\n"
    assert seen["request"] == "hi"
    models = seen["models"]
    assert isinstance(models, dict)
    assert set(models.values()) == {"gpt-4.1-mini"}
    assert set(models) == {COORDINATOR, TRIAGE, PLANNER, "review-agent", "leave-agent", "payroll-agent",
                           "benefits-agent"}
