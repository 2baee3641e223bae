"""The agency the authentication tests serve: one agent whose tools, instructions and input guardrail read the
request's run context (`RequestContext`), and `Tenant`, the context schema (`--context-schema auth_app:Tenant`).

The scripted model calls `whoami` for a message "whoami", `billing` for "billing", `ask` (which waits for approval)
for "ask", and otherwise answers "heard: <message> | <its system instructions>"; after a tool it answers "tool:
<output>". `SEEN` records what the guardrail saw (in-process tests only)."""

from __future__ import annotations

from typing import Any, Literal

from agents import GuardrailFunctionOutput, RunContextWrapper, function_tool, input_guardrail
from pydantic import BaseModel

from agency_swarm import Agency, Agent, ThreadStore
from agency_swarm.serving import RequestContext
from agency_swarm.testing import ModelCall, ScriptedModel, Step, ToolCall

SEEN: list[tuple[str, str | None]] = []


class Tenant(BaseModel):
    tenant: str
    plan: Literal["free", "pro"] = "free"


Context = RunContextWrapper[RequestContext[Tenant]]


@function_tool
def whoami(ctx: Context) -> str:
    """Say who asks, for which tenant, in which chat."""
    request = ctx.context
    tenant = request.data.tenant if request.data is not None else "-"
    return f"{request.principal.name} of {tenant} in {request.chat_id}"


@function_tool
def billing(ctx: Context) -> str:
    """The caller's bill: only for a principal with the billing:read scope, on the pro plan."""
    request = ctx.context
    if "billing:read" not in request.principal.scopes:
        return "refused: the billing:read scope is needed"
    if request.data is None or request.data.plan != "pro":
        return "refused: the pro plan is needed"
    return f"bill of {request.principal.name}: 42"


@function_tool(needs_approval=True)
def ask(ctx: Context) -> str:
    """Ask, once a person approved it."""
    return f"asked for {ctx.context.principal.name}"


def instructions(ctx: Context, agent: Any) -> str:
    return f"You serve {ctx.context.principal.name}."


@input_guardrail
def note_caller(ctx: Context, agent: Any, message: Any) -> GuardrailFunctionOutput:
    data = ctx.context.data
    SEEN.append((ctx.context.principal.name, None if data is None else data.tenant))
    return GuardrailFunctionOutput(output_info=None, tripwire_triggered=False)


def script(call: ModelCall) -> Step:
    if call.tool_outputs:
        return f"tool: {call.tool_outputs[-1]}"
    message = call.last_user_message
    if message in ("whoami", "billing", "ask"):
        return ToolCall(message, {})
    return f"heard: {message} | {call.system_instructions}"


def build_agency(store: ThreadStore) -> Agency:
    agent = Agent(
        name="A", instructions=instructions, model=ScriptedModel(script), tools=[whoami, billing, ask],
        input_guardrails=[note_caller],
    )
    return Agency(agent, thread_store=store)
