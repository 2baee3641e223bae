"""The agencies of the A2A tests, with scripted models: a Developer agency served over A2A (Developer, who asks QA
when told `[qa]` and deploys, after approval, when told `[deploy]`), and a CEO agency whose Developer is remote.

`agency-swarm serve --a2a --factory a2a_app:build_remote` serves the first; `build_caller` reads the remote's URL
from $AGENCY_SWARM_TEST_REMOTE.
"""

from __future__ import annotations

import os
from typing import Any

from agents import set_tracing_disabled

from agency_swarm import Agency, Agent, RemoteAgent, function_tool
from agency_swarm._threads._store import ThreadStore
from agency_swarm.testing import ModelCall, ScriptedModel, Step, ToolCall, send_message
from serving_app import GatedModel, user_messages

set_tracing_disabled(True)
REMOTE_ENV = "AGENCY_SWARM_TEST_REMOTE"
deployed: list[str] = []


@function_tool(needs_approval=True)
def deploy(target: str) -> str:
    """Deploy the build to `target`."""
    deployed.append(target)
    return f"deployed to {target}"


def developer_script(call: ModelCall) -> Step:
    message = call.last_user_message
    if not call.tool_outputs:
        if "[deploy]" in message:
            return ToolCall("deploy", {"target": "prod"})
        if "[qa]" in message:
            return send_message("QA", f"check: {message}")
    said = f" ({call.tool_outputs[-1]})" if call.tool_outputs else ""
    return f"Developer did: {message}{said} [seen {user_messages(call)}]"


def qa_script(call: ModelCall) -> Step:
    return f"QA checked: {call.last_user_message}"


def build_remote(store: ThreadStore) -> Agency:
    developer = Agent(
        name="Developer", description="Writes and deploys code.", tools=[deploy],
        model=GatedModel(developer_script, name="developer"),
    )
    qa = Agent(name="QA", description="Checks the work.", model=ScriptedModel(qa_script, name="qa"))
    return Agency([developer, [developer, qa]], thread_store=store)


def ceo_script(call: ModelCall) -> Step:
    if not call.tool_outputs:
        return send_message("Developer", call.last_user_message)
    return f"CEO: {call.tool_outputs[-1]}"


def build_caller(store: ThreadStore | None = None, url: str | None = None, **remote: Any) -> Agency:
    developer = RemoteAgent(name="Developer", url=url or os.environ[REMOTE_ENV], **remote)
    ceo = Agent(name="CEO", description="Talks to the user.", model=ScriptedModel(ceo_script, name="ceo"))
    return Agency([ceo, [ceo, developer]], thread_store=store)


def build_shallow_remote(store: ThreadStore) -> Agency:
    """build_remote's agents under a depth limit of 1: a message from depth 1 may not be sent on."""
    agency = build_remote(store)
    return Agency([agency.agents["Developer"], [agency.agents["Developer"], agency.agents["QA"]]],
                  thread_store=store, max_recursion_depth=1)
