"""The agency the AG-UI tests serve: CEO -> Developer -> QA, each forwarding the user's message, its behaviour chosen
by words in it:

- (any): CEO sends it to Developer, Developer to QA; QA answers "QA checked", Developer "Dev: <QA's answer>", CEO
  "CEO: <Developer's answer>";
- "approve": QA calls `deploy` first, which waits for approval;
- "toolerror": Developer calls `broken` (it raises) instead of sending to QA;
- "suberror": Developer's model fails (CEO reads why and answers);
- "modelerror": CEO's model fails after streaming some text (the run fails).

`agency-swarm serve --factory ag_ui_app:build_agency --ag-ui ...` serves it.
"""

from __future__ import annotations

from agents import function_tool

from agency_swarm import Agency, Agent, ThreadStore
from agency_swarm.testing import Fail, ModelCall, ScriptedModel, Step, ToolCall, send_message

SECRET = "secret-internals-7f3a"
"""In the exceptions the failing tool and models raise: never in a RUN_ERROR."""


@function_tool(needs_approval=True)
def deploy(target: str) -> str:
    """Deploy to a target, once a person approved it."""
    return f"deployed {target}"


@function_tool
def broken(reason: str) -> str:
    """A tool that fails."""
    raise ValueError(f"{SECRET}: {reason}")


def ceo_script(call: ModelCall) -> Step:
    message = call.last_user_message
    if not call.tool_outputs:
        if "modelerror" in message:
            return Fail(RuntimeError(SECRET), partial_text="Let me think")
        return send_message("Developer", message)
    return f"CEO: {call.tool_outputs[-1]}"


def developer_script(call: ModelCall) -> Step:
    message = call.last_user_message
    if not call.tool_outputs:
        if "suberror" in message:
            return Fail(RuntimeError(SECRET))
        if "toolerror" in message:
            return ToolCall("broken", {"reason": "on purpose"})
        return send_message("QA", message)
    return f"Dev: {call.tool_outputs[-1]}"


def qa_script(call: ModelCall) -> Step:
    if not call.tool_outputs:
        return ToolCall("deploy", {"target": "prod"}) if "approve" in call.last_user_message else "QA checked"
    return f"QA: {call.tool_outputs[-1]}"


def build_agency(store: ThreadStore) -> Agency:
    ceo = Agent(name="CEO", description="Talks to the user.", model=ScriptedModel(ceo_script))
    developer = Agent(name="Developer", description="Writes the code.", model=ScriptedModel(developer_script),
                      tools=[broken])
    qa = Agent(name="QA", description="Tests and deploys.", model=ScriptedModel(qa_script), tools=[deploy])
    return Agency([ceo, [ceo, developer], [developer, qa]], thread_store=store)
