"""The domain: which sub-agents exist, what they can do and which tools they get. Adding an agent is one entry here."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ToolConfig(BaseModel):
    """A tool a sub-agent gets: `name` must be a function in hr_tools.TOOL_FUNCTIONS; the model sees `description`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str


class SubAgentConfig(BaseModel):
    """One sub-agent. `key` is what plans name; `name` is the agent's name in the chart."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    name: str = Field(min_length=1)
    description: str
    capabilities: list[str]
    tools: list[ToolConfig] = Field(default_factory=list)


DOMAIN_NAME = "HR Assistant"
DOMAIN_DESCRIPTION = "Helps employees with their leave, their pay and their benefits."

SUB_AGENTS = [
    SubAgentConfig(
        key="leave",
        name="leave-agent",
        description="Handles vacation and other leave.",
        capabilities=["Check an employee's remaining leave days", "Book leave between two dates"],
        tools=[
            ToolConfig(name="get_leave_balance", description="Remaining leave days of an employee."),
            ToolConfig(name="submit_leave", description="Book leave (ISO dates, both included) with a reason."),
        ],
    ),
    SubAgentConfig(
        key="payroll",
        name="payroll-agent",
        description="Answers questions about pay.",
        capabilities=["Show an employee's latest pay stub"],
        tools=[ToolConfig(name="latest_pay_stub", description="The latest pay stub of an employee.")],
    ),
    SubAgentConfig(
        key="benefits",
        name="benefits-agent",
        description="Answers questions about insurance and other benefits.",
        capabilities=["List the benefit plans an employee is enrolled in"],
        tools=[ToolConfig(name="list_benefits", description="The benefit plans an employee is enrolled in.")],
    ),
]
