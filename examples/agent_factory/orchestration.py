"""The orchestration agents (coordinator, triage, plan, review): prompts rendered from templates and output schemas
generated at run time, both from the registry. Nothing here names a sub-agent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from agency_swarm import Agency, Agent

from .registry import ModelFor, SubAgentRegistry

COORDINATOR = "coordinator"
TRIAGE = "triage-agent"
PLANNER = "plan-agent"
REVIEWER = "review-agent"
ORCHESTRATION_AGENTS = (TRIAGE, PLANNER, REVIEWER)
"""Agents whose structured output the observer prints (the decisions behind the answer)."""

COORDINATOR_TEMPLATE = """You coordinate {domain_name}: {domain_description}

The sub-agents (key, agent name, capabilities):
{agent_descriptions}

Handle every request in these steps, each with send_message:
1. Send the user's request to {triage}. If it rejects the request, tell the user why and stop.
2. Send the request and the keys triage chose to {planner}. It answers with a plan: ordered steps, each naming the
   key of an agent and its task.
3. Execute the plan: for each step, in order, message the agent with that key (use its agent name) and its task,
   including the employee id and any dates. Wait for each reply before the next step.
4. Send the request and every reply to {reviewer}.
5. Answer the user with a short summary of what was done and any issue the review found."""

TRIAGE_TEMPLATE = """You triage requests for {domain_name}: {domain_description}

The sub-agents (key, agent name, capabilities):
{agent_descriptions}

Reject a request that none of them can handle, with a short reason. Otherwise list the keys of the agents needed."""

PLAN_TEMPLATE = """You plan the work for {domain_name}.

The sub-agents (key, agent name, capabilities, tools):
{agent_descriptions}

Answer with ordered steps; each names the key of one agent and a self-contained task for it (employee id, dates and
reason included). Use only the agents listed; keep the order in which the user asked for things."""

REVIEW_TEMPLATE = """You review the work of {domain_name}'s agents. You get the user's request and each agent's reply.
Approve when every part of the request was handled; otherwise list what is missing or failed."""

REJECTION_TEMPLATE = "Sorry, {domain_name} cannot help with that: {reason}"


def agent_key_type(keys: list[str]) -> Any:
    """A Literal of the registered keys: the model's JSON schema gets an enum, and pydantic rejects any other key."""
    if not keys:
        raise ValueError("The registry has no sub-agents; register at least one.")
    return Literal[tuple(keys)]


def create_triage_schema(keys: list[str]) -> type[BaseModel]:
    key = agent_key_type(keys)
    return create_model(
        "TriageDecision",
        should_reject=(bool, Field(description="True when no registered agent can handle the request.")),
        reject_reason=(str, Field(description="Why the request is rejected; empty when it is not.")),
        agents=(list[key], Field(description="Keys of the agents the request needs.")),
    )


def create_plan_schema(keys: list[str]) -> type[BaseModel]:
    step = create_model(
        "PlanStep",
        agent=(agent_key_type(keys), Field(description="Key of the agent that does this step.")),
        task=(str, Field(description="The task for that agent, with every detail it needs.")),
    )
    return create_model("Plan", steps=(list[step], Field(description="The steps, in the order to run them.")))


class Review(BaseModel):
    approved: bool = Field(description="True when every part of the request was handled.")
    issues: list[str] = Field(description="What is missing or failed; empty when approved.")


@dataclass(kw_only=True, frozen=True)
class Schemas:
    """The schemas generated for one registry; the coordinator's offline script parses replies with them too."""

    triage: type[BaseModel]
    plan: type[BaseModel]
    review: type[BaseModel] = Review

    @classmethod
    def for_registry(cls, registry: SubAgentRegistry) -> Schemas:
        return cls(triage=create_triage_schema(registry.agent_keys), plan=create_plan_schema(registry.agent_keys))


def build_agency(registry: SubAgentRegistry, model_for: ModelFor) -> Agency:
    """The coordinator is the entry point and may message every other agent; nobody else messages anyone."""
    schemas = Schemas.for_registry(registry)
    names = {"domain_name": registry.domain_name, "domain_description": registry.domain_description}
    coordinator = Agent(
        name=COORDINATOR, model=model_for(COORDINATOR), description="Talks to the employee; runs the workflow.",
        instructions=COORDINATOR_TEMPLATE.format(
            **names, agent_descriptions=registry.describe(), triage=TRIAGE, planner=PLANNER, reviewer=REVIEWER
        ),
    )
    triage = Agent(
        name=TRIAGE, model=model_for(TRIAGE), output_type=schemas.triage,
        description="Decides whether a request is in scope and which agents it needs.",
        instructions=TRIAGE_TEMPLATE.format(**names, agent_descriptions=registry.describe()),
    )
    planner = Agent(
        name=PLANNER, model=model_for(PLANNER), output_type=schemas.plan,
        description="Turns a request into ordered steps, one agent each.",
        instructions=PLAN_TEMPLATE.format(**names, agent_descriptions=registry.describe(with_tools=True)),
    )
    reviewer = Agent(
        name=REVIEWER, model=model_for(REVIEWER), output_type=schemas.review,
        description="Checks the replies against the request.",
        instructions=REVIEW_TEMPLATE.format(**names),
    )
    workers = registry.build_agents(model_for)
    recipients = [triage, planner, *workers.values(), reviewer]
    return Agency(coordinator, communication_flows=[(coordinator, agent) for agent in recipients])
