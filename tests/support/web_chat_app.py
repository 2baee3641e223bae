"""The agency the web chat page's browser tests serve: CEO sends every user message to Developer and reports back
(to Analyst instead for a message holding "analyst"). CEO's and Developer's models are priced (`PRICES`), Analyst's
is not: its turns' cost is unknown. A message's images and files may be 1 MiB each (`MAX_PART_BYTES`).

Developer's behaviour is chosen by words in the message: "approve" calls `deploy` (it waits for approval); "xss"
answers with markup that would run script if a page parsed it as HTML; `[hold]` first waits at the test's gate
(serving_app.GatedModel); anything else is answered "Dev did: <message>".
"""

from __future__ import annotations

from agents import function_tool

from agency_swarm import Agency, Agent, AttachmentLimits, ThreadStore, set_model_price
from agency_swarm.testing import ModelCall, ScriptedModel, Step, ToolCall, send_message
from serving_app import GatedModel

MAX_PART_BYTES = 1024 * 1024
"""The largest image or file a message may carry here (the servers take bodies up to 4 MiB)."""
PRICES = {"web-chat-ceo": (1.0, 2.0), "web-chat-dev": (3.0, 6.0)}
"""USD per 1M input and output tokens of CEO's and Developer's models (Analyst's model has no price)."""
XSS = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2; alert(1)"> done'


@function_tool(needs_approval=True)
def deploy(target: str) -> str:
    """Deploy to a target, once a person approved it."""
    return f"deployed {target}"


def ceo_script(call: ModelCall) -> Step:
    if not call.tool_outputs:
        recipient = "Analyst" if "analyst" in call.last_user_message else "Developer"
        return send_message(recipient, call.last_user_message)
    return f"CEO: {call.tool_outputs[-1]}"


def developer_script(call: ModelCall) -> Step:
    message = call.last_user_message
    if call.tool_outputs:
        return f"Dev: {call.tool_outputs[-1]}"
    if "approve" in message:
        return ToolCall("deploy", {"target": "prod"})
    if "xss" in message:
        return XSS
    return f"Dev did: {message}"


def build_agency(store: ThreadStore) -> Agency:
    for model, (input_price, output_price) in PRICES.items():
        set_model_price(model, input=input_price, output=output_price)
    ceo = Agent(name="CEO", description="Talks to the user.", model=ScriptedModel(ceo_script, name="web-chat-ceo"))
    developer = Agent(name="Developer", description="Writes the code.", tools=[deploy],
                      model=GatedModel(developer_script, name="web-chat-dev"))
    analyst_model = ScriptedModel(lambda call: f"Analyst read: {call.last_user_message}", name="web-chat-analyst")
    analyst = Agent(name="Analyst", description="Reads the numbers.", model=analyst_model)
    return Agency([ceo, [ceo, developer], [ceo, analyst]], thread_store=store,
                  attachment_limits=AttachmentLimits(max_part_bytes=MAX_PART_BYTES))
