"""Quickstart: a CEO that delegates to a Developer. Offline: scripted models stand in for real ones."""

from agency_swarm import Agency, Agent
from agency_swarm.testing import ScriptedModel, send_message

ceo = Agent(
    name="CEO",
    description="Talks to the user and delegates the work.",
    instructions="Delegate coding tasks to the Developer, then report back to the user.",
    model=ScriptedModel([send_message("Developer", "Write hello.py"), "Done: hello.py prints a greeting."]),
)
dev = Agent(
    name="Developer",
    description="Writes code.",
    instructions="Write the code you are asked for.",
    model=ScriptedModel(["hello.py: print('Hello, world!')"]),  # or a real model: model="gpt-4.1-mini"
)
agency = Agency([ceo, [ceo, dev]])  # CEO is the entry point; CEO may message Developer
result = agency.get_response_sync("Please write a hello world script.")
print(result.final_output)  # Done: hello.py prints a greeting.
print(list(agency.thread_manager.get_threads(result.chat_id)))  # ['user->CEO', 'CEO->Developer']
