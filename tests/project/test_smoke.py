from agency_swarm import Agency, Agent
from agency_swarm.testing import ScriptedModel, send_message


async def test_ceo_delegates_to_developer_and_answers() -> None:
    ceo = Agent(name="CEO", description="Runs it", model=ScriptedModel([send_message("Developer", "build"), "done"]))
    dev = Agent(name="Developer", description="Codes", model=ScriptedModel(["built"]))
    result = await Agency([ceo, [ceo, dev]]).get_response("Build a landing page")
    assert result.final_output == "done"
    assert result.usage.requests == 3
