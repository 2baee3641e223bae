"""The four agents. Solver (the entry point) runs the loop with send_message: Planner -> Executor -> Verifier, again
until the Verifier says STOP. Planner and Verifier read the memory in their instructions, rendered at every turn."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from agents import Model, RunContextWrapper
from pydantic import BaseModel, Field

from agency_swarm import Agency, Agent

from .memory import FlowState
from .tools import TOOL_NAMES, TOOLS

SOLVER, PLANNER, EXECUTOR, VERIFIER = "Solver", "Planner", "Executor", "Verifier"

ToolName = Literal[tuple(TOOL_NAMES)]  # type: ignore[valid-type]


class NextStep(BaseModel):
    justification: str = Field(description="Why this step is the most useful one now.")
    context: str = Field(description="What the executor needs to know from earlier steps.")
    sub_goal: str = Field(description="The concrete goal of this step.")
    tool_name: ToolName = Field(description="The tool that reaches the sub-goal.")
    tool_input: str = Field(description="The search query or the arithmetic expression.")


class Verdict(BaseModel):
    analysis: str = Field(description="Does the memory answer the question? What is missing?")
    conclusion: Literal["STOP", "CONTINUE"] = Field(description="STOP when the memory answers the question.")


SOLVER_INSTRUCTIONS = f"""You solve the user's question with three agents, using send_message:
0. If the user sent an image, pass it on with every message you send (`attachments`: its id, shown as
   [attachment att_...]): every agent needs to see it.
1. Ask {PLANNER} for the next step (send the question).
2. Send {EXECUTOR} the planner's sub-goal, tool name, tool input and context, exactly.
3. Ask {VERIFIER} whether the question is answered now (send the question).
4. If the verifier's conclusion is CONTINUE, go back to 1. If it is STOP, answer the user from the executor's results.
If the user tells you to stop, answer at once with the best answer the results so far allow, and say it may be
incomplete."""


def planner_instructions(ctx: RunContextWrapper[FlowState], agent: object) -> str:
    state = ctx.context
    return f"""You plan the next step towards answering: {state.question}
Tools: {", ".join(TOOL_NAMES)} (search: an encyclopedia, by keywords; calculator: arithmetic expressions).
This is step {state.step}. What has been done so far:
{state.memory.render()}
Choose one step that brings the answer closer; never repeat a step that already succeeded."""


def verifier_instructions(ctx: RunContextWrapper[FlowState], agent: object) -> str:
    state = ctx.context
    return f"""You decide whether the memory below answers the question: {state.question}
Memory:
{state.memory.render()}
Conclude STOP only when every number or fact the answer needs is in the memory; otherwise CONTINUE."""


EXECUTOR_INSTRUCTIONS = """You run one step: call the tool you are given with the input you are given (fix only
obvious formatting), then reply with the tool's result in one sentence."""


def build_agency(model_for: Callable[[str], Model | str], *, max_model_calls: int = 60) -> Agency:
    """`max_model_calls` is the Solver's own safety net (Agent.max_steps); the solve loop's limits come first."""
    solver = Agent(name=SOLVER, model=model_for(SOLVER), instructions=SOLVER_INSTRUCTIONS,
                   max_steps=max_model_calls, description="Answers the user's question.")
    planner = Agent(name=PLANNER, model=model_for(PLANNER), instructions=planner_instructions, output_type=NextStep,
                    description="Chooses the next sub-goal and the tool for it.")
    executor = Agent(name=EXECUTOR, model=model_for(EXECUTOR), instructions=EXECUTOR_INSTRUCTIONS, tools=list(TOOLS),
                     description="Runs one step with a tool and reports the result.")
    verifier = Agent(name=VERIFIER, model=model_for(VERIFIER), instructions=verifier_instructions,
                     output_type=Verdict, description="Says STOP when the memory answers the question.")
    return Agency(solver, communication_flows=[(solver, planner), (solver, executor), (solver, verifier)])
