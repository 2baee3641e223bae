"""Agency.from_config: YAML or JSON files describe agents, chart, instructions and store; bad files fail clearly."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest
from agents import ModelProvider, MultiProvider

from agency_swarm import (
    Agency,
    ConfigError,
    ConfigFileError,
    FileThreadStore,
    MemoryThreadStore,
    SQLiteThreadStore,
    SQLThreadStore,
    function_tool,
)
from agency_swarm.testing import ScriptedModel, ToolCall, send_message

searched: list[str] = []


@function_tool
def web_search(query: str) -> str:
    """Search the web."""
    searched.append(query)
    return f"results for {query}"


@function_tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"content of {path}"


@function_tool
def write_file(path: str, content: str) -> str:
    """Write a file."""
    return f"wrote {path}"


@function_tool(needs_approval=True)
def send_email(to: str) -> str:
    """Send an email."""
    return f"sent to {to}"


TOOLKITS = {"search": [web_search], "files": [read_file, write_file], "email": [send_email]}

FLAT = """
shared_instructions: "You work for Acme. You are {{agent_name}}."
max_recursion_depth: 3
agents:
  Supervisor:
    description: Routes requests to the right worker.
    model: gpt-4.1-mini
    temperature: 0.2
    top_p: 0.9
    max_tokens: 800
    reasoning: {effort: low}
    instructions: |
      Today is {{date}}. Route each request to one of:
      {{AVAILABLE_AGENTS}}
  Researcher:
    description: Finds facts on the web.
    model: gpt-4.1-mini
    instructions_file: prompts/researcher.md
    toolkits: [search]
    max_iterations: 7
    history_window: 6
  Writer:
    description: Writes the final text.
    instructions: Write clearly.
    toolkits:
      - toolkit: files
        tools: [write_file]
    max_steps: 4
chart:
  supervisor: Supervisor
  workers: [Researcher, Writer]
"""

DEPARTMENTS = """
agents:
  CEO: {description: Runs the company., instructions: "{{AVAILABLE_AGENTS}}"}
  EngLead: {description: Leads engineering., instructions: "{{AVAILABLE_AGENTS}}"}
  Dev: {description: Writes code.}
  QA: {description: Tests code.}
  SalesLead: {description: Leads sales.}
  Rep: {description: Sells.}
  Infra: {description: Runs servers.}
chart:
  supervisor: CEO
  departments:
    - lead: EngLead
      workers: [Dev, QA]
      departments:
        - lead: Infra
    - lead: SalesLead
      workers: [Rep]
"""


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def line_of(path: Path, fragment: str) -> int:
    """1-based line of the first line containing `fragment`."""
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if fragment in line:
            return number
    raise AssertionError(f"{fragment!r} not in {path}")


@pytest.fixture(autouse=True)
def _clear_searched() -> None:
    searched.clear()


@pytest.fixture
def flat(tmp_path: Path) -> Path:
    write(tmp_path, "prompts/researcher.md", "Research carefully, {{agent_name}}.\n")
    return write(tmp_path, "agency.yaml", FLAT)


def load_error(path: Path, **kwargs: Any) -> ConfigFileError:
    with pytest.raises(ConfigFileError) as caught:
        Agency.from_config(path, **kwargs)
    error = caught.value
    assert error.path == str(path)
    assert str(error).startswith(str(path))
    return error


# -- what a valid file builds ---------------------------------------------------------------------------------


def test_flat_team_builds_agents_settings_tools_and_chart(flat: Path) -> None:
    agency = Agency.from_config(flat, toolkits=TOOLKITS)
    assert [agent.name for agent in agency.entry_points] == ["Supervisor"]
    assert agency.communication_flows == [("Supervisor", "Researcher"), ("Supervisor", "Writer")]
    assert agency.max_recursion_depth == 3
    supervisor, researcher, writer = (agency.agents[name] for name in ("Supervisor", "Researcher", "Writer"))
    assert supervisor.description == "Routes requests to the right worker."
    assert supervisor.model == "gpt-4.1-mini"  # resolved by the provider at run time: loading needs no API key
    settings = supervisor.model_settings
    assert (settings.temperature, settings.top_p, settings.max_tokens) == (0.2, 0.9, 800)
    assert settings.reasoning is not None
    assert settings.reasoning.effort == "low"
    assert researcher.max_steps == 7  # max_iterations is max_steps under the reference design's name
    assert researcher.history_window == 6
    assert researcher.instructions == "Research carefully, {{agent_name}}.\n"
    assert [tool.name for tool in researcher.tools] == ["web_search"]
    assert [tool.name for tool in writer.tools] == ["write_file"]
    assert writer.max_steps == 4
    assert writer.model is None
    assert agency.shared_instructions == "You work for Acme. You are {{agent_name}}."


async def test_a_turn_runs_with_placeholders_expanded_in_what_each_model_receives(flat: Path) -> None:
    supervisor = ScriptedModel([send_message("Researcher", "Find the launch date"), "Launch is in May."])
    researcher = ScriptedModel([ToolCall("web_search", {"query": "launch date"}), "May."])
    agency = Agency.from_config(
        flat, toolkits=TOOLKITS, models={"Supervisor": supervisor, "Researcher": researcher}
    )
    result = await agency.get_response("When do we launch?")
    assert result.final_output == "Launch is in May."
    assert searched == ["launch date"]
    today = supervisor.calls[0].system_instructions.split("Today is ")[1][:10]
    assert len(today) == 10
    assert today[4] == today[7] == "-"
    assert supervisor.calls[0].system_instructions == (
        "You work for Acme. You are Supervisor.\n\n"
        f"Today is {today}. Route each request to one of:\n"
        "- Researcher: Finds facts on the web.\n"
        "- Writer: Writes the final text.\n"
    )
    assert researcher.calls[0].system_instructions == (
        "You work for Acme. You are Researcher.\n\nResearch carefully, Researcher.\n"
    )
    assert researcher.calls[0].tool_names == ["web_search"]
    assert supervisor.calls[0].tool_names == ["send_message"]
    assert supervisor.calls[0].model_settings.temperature == 0.2


async def test_adding_an_agent_to_the_file_changes_available_agents_without_a_prompt_edit(tmp_path: Path) -> None:
    text = """
    agents:
      Orchestrator: {instructions: "Team:\\n{{AVAILABLE_AGENTS}}"}
      Researcher: {description: Finds facts.}
    chart: {supervisor: Orchestrator, workers: [Researcher]}
    """
    before = ScriptedModel(["ok"])
    await Agency.from_config(write(tmp_path, "a.yaml", text), models={"Orchestrator": before}).get_response("hi")
    grown = text.replace("workers: [Researcher]", "workers: [Researcher, Engineer]").replace(
        "  Researcher: {description: Finds facts.}", "  Researcher: {description: Finds facts.}\n"
        "      Engineer: {description: Writes code.}"
    )
    after = ScriptedModel(["ok"])
    await Agency.from_config(write(tmp_path, "b.yaml", grown), models={"Orchestrator": after}).get_response("hi")
    assert before.calls[0].system_instructions == "Team:\n- Researcher: Finds facts."
    assert after.calls[0].system_instructions == "Team:\n- Researcher: Finds facts.\n- Engineer: Writes code."


async def test_hierarchical_departments(tmp_path: Path) -> None:
    ceo, eng = ScriptedModel([send_message("EngLead", "ship it"), "shipped"]), ScriptedModel(["on it"])
    agency = Agency.from_config(write(tmp_path, "org.yaml", DEPARTMENTS), models={"CEO": ceo, "EngLead": eng})
    assert [agent.name for agent in agency.entry_points] == ["CEO"]
    assert agency.communication_flows == [
        ("CEO", "EngLead"), ("CEO", "SalesLead"), ("EngLead", "Dev"), ("EngLead", "QA"), ("EngLead", "Infra"),
        ("SalesLead", "Rep"),
    ]
    assert (await agency.get_response("Ship the release")).final_output == "shipped"
    assert ceo.calls[0].system_instructions == "- EngLead: Leads engineering.\n- SalesLead: Leads sales."
    assert eng.calls[0].system_instructions == "- Dev: Writes code.\n- QA: Tests code.\n- Infra: Runs servers."


def test_entry_points_and_flow_chains_combine_with_a_supervisor(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", """
    agents: {Lead: {}, Dev: {}, QA: {}, Helpdesk: {}, Docs: {}}
    chart:
      supervisor: Lead
      workers: [Dev]
      entry_points: [Helpdesk]
      flows:
        - [Dev, QA, Docs]
        - [Helpdesk, Lead]
    """)
    agency = Agency.from_config(path)
    assert [agent.name for agent in agency.entry_points] == ["Lead", "Helpdesk"]
    assert agency.communication_flows == [("Lead", "Dev"), ("Dev", "QA"), ("QA", "Docs"), ("Helpdesk", "Lead")]


def test_one_agent_needs_no_chart(tmp_path: Path) -> None:
    agency = Agency.from_config(write(tmp_path, "solo.yml", "agents:\n  Solo:\n    description: Alone.\n"))
    assert [agent.name for agent in agency.entry_points] == ["Solo"]
    assert agency.communication_flows == []


def test_agents_as_a_list_with_names(tmp_path: Path) -> None:
    path = write(tmp_path, "list.yaml", """
    agents:
      - name: Lead
        description: Leads.
      - name: Dev
        temperature: 0.1
    chart: {supervisor: Lead, workers: [Dev]}
    """)
    agency = Agency.from_config(path)
    assert list(agency.agents) == ["Lead", "Dev"]
    assert agency.agents["Dev"].model_settings.temperature == 0.1


async def test_json_config_is_the_same_schema(tmp_path: Path) -> None:
    data = {
        "shared_instructions": "Be brief.",
        "agents": {
            "Lead": {"description": "Leads.", "instructions": "{{AVAILABLE_AGENTS}}"},
            "Dev": {"description": "Codes."},
        },
        "chart": {"supervisor": "Lead", "workers": ["Dev"]},
    }
    path = tmp_path / "agency.json"
    path.write_text(json.dumps(data, indent=2))
    lead = ScriptedModel(["ok"])
    await Agency.from_config(path, models={"Lead": lead}).get_response("hi")
    assert lead.calls[0].system_instructions == "Be brief.\n\n- Dev: Codes."


def test_instruction_files_are_relative_to_the_config_not_the_working_directory(
    flat: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    agency = Agency.from_config(os.path.relpath(flat), toolkits=TOOLKITS)
    assert agency.agents["Researcher"].instructions == "Research carefully, {{agent_name}}.\n"


def test_shared_instructions_from_a_file(tmp_path: Path) -> None:
    write(tmp_path, "shared.md", "Company rules for {{agent_name}}.")
    agency = Agency.from_config(write(tmp_path, "a.yaml", "shared_instructions_file: shared.md\nagents: {Solo: {}}\n"))
    assert agency.shared_instructions == "Company rules for {{agent_name}}."


def test_a_symlink_that_stays_inside_the_config_directory_is_fine(tmp_path: Path) -> None:
    write(tmp_path, "prompts/real.md", "Real prompt.")
    (tmp_path / "prompts" / "link.md").symlink_to(tmp_path / "prompts" / "real.md")
    path = write(tmp_path, "a.yaml", "agents:\n  Solo: {instructions_file: prompts/link.md}\n")
    assert Agency.from_config(path).agents["Solo"].instructions == "Real prompt."


# -- models -------------------------------------------------------------------------------------------------


async def test_one_model_for_every_agent(tmp_path: Path) -> None:
    path = write(
        tmp_path, "a.yaml", "agents: {Lead: {model: gpt-4.1}, Dev: {}}\nchart: {supervisor: Lead, workers: [Dev]}"
    )
    shared = ScriptedModel(lambda call: "ok")
    agency = Agency.from_config(path, models=shared)
    assert agency.agents["Lead"].model is shared
    assert agency.agents["Dev"].model is shared
    assert (await agency.get_response("hi")).final_output == "ok"


def test_models_map_agent_names_first_then_model_names(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", """
    agents: {Lead: {model: big}, Dev: {model: small}, QA: {model: small}, Docs: {model: other}}
    chart: {supervisor: Lead, workers: [Dev, QA, Docs]}
    """)
    by_agent, by_name = ScriptedModel(["a"]), ScriptedModel(["b"])
    agency = Agency.from_config(path, models={"QA": by_agent, "small": by_name})
    assert agency.agents["QA"].model is by_agent
    assert agency.agents["Dev"].model is by_name
    assert agency.agents["Lead"].model == "big"
    assert agency.agents["Docs"].model == "other"


def test_a_models_key_that_matches_nothing_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", "agents: {Lead: {model: gpt-4.1}}\n")
    with pytest.raises(ConfigError, match=r"models= names 'Leader', which is neither an agent nor a model name"):
        Agency.from_config(path, models={"Leader": ScriptedModel(["x"])})


@pytest.mark.parametrize("models", [["not", "a", "mapping"], {"Lead": "gpt-4.1"}])
def test_models_must_be_model_instances(tmp_path: Path, models: Any) -> None:
    path = write(tmp_path, "a.yaml", "agents: {Lead: {}}\n")
    with pytest.raises(ConfigError, match=r"agents\.Model"):
        Agency.from_config(path, models=models)


def test_model_provider_is_the_agencys(tmp_path: Path) -> None:
    provider = MultiProvider()
    path = write(tmp_path, "a.yaml", "agents: {Lead: {model: gpt-4.1}}\n")
    agency = Agency.from_config(path, model_provider=provider)
    assert isinstance(agency.model_provider, ModelProvider)
    assert agency.model_provider is provider


# -- history trimming, approvals ----------------------------------------------------------------------------


async def test_history_window_sends_the_first_item_and_the_last_n(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", "agents:\n  Solo: {history_window: 2}\n")
    model = ScriptedModel.each_turn(["reply"])
    agency = Agency.from_config(path, models=model)
    for number in range(4):
        await agency.get_response(f"message {number}")
    last = model.calls[-1].input
    assert [item.get("content") for item in last[:1]] == ["message 0"]
    assert len(last) == 3
    assert last[-1] == {"role": "user", "content": "message 3"}
    assert len(agency.thread_manager.get_threads("default")["user->Solo"]) == 8  # the store keeps everything


async def test_a_toolkit_tool_that_needs_approval_pauses_and_resumes(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", "agents:\n  Mailer: {toolkits: [email]}\n")
    model = ScriptedModel([ToolCall("send_email", {"to": "ceo@example.com"}), "Email sent."])
    agency = Agency.from_config(path, toolkits=TOOLKITS, models=model)
    paused = await agency.get_response("Mail the CEO")
    assert paused.paused
    assert [(item.tool, item.agent) for item in paused.interruptions] == [("send_email", "Mailer")]
    finished = await agency.resume(approve=[paused.interruptions[0].call_id])
    assert finished.final_output == "Email sent."
    assert model.calls[-1].tool_outputs == ["sent to ceo@example.com"]


# -- stores -------------------------------------------------------------------------------------------------


async def test_file_store_dir_is_relative_to_the_config_and_keeps_chats(tmp_path: Path) -> None:
    path = write(tmp_path, "conf/a.yaml", "agents: {Solo: {}}\nstore: {type: file, dir: threads}\n")
    first = ScriptedModel.each_turn(["first"])
    async with Agency.from_config(path, models=first) as agency:
        assert isinstance(agency.thread_manager.store, FileThreadStore)
        await agency.get_response("remember me", chat_id="c1")
    assert (tmp_path / "conf" / "threads" / "c1.jsonl").is_file()
    second = ScriptedModel.each_turn(["second"])
    async with Agency.from_config(path, models=second) as again:
        await again.get_response("still there?", chat_id="c1")
    assert [item.get("content") for item in second.calls[0].input if item.get("role") == "user"] == [
        "remember me", "still there?",
    ]


async def test_sqlite_store_path_and_url_are_relative_to_the_config(tmp_path: Path) -> None:
    by_path = write(tmp_path, "conf/a.yaml", "agents: {Solo: {}}\nstore: {type: sqlite, path: data/chats.db}\n")
    (tmp_path / "conf" / "data").mkdir()
    async with Agency.from_config(by_path, models=ScriptedModel(["ok"])) as agency:
        assert isinstance(agency.thread_manager.store, SQLiteThreadStore)
        await agency.get_response("hi")
    assert (tmp_path / "conf" / "data" / "chats.db").is_file()
    by_url = write(tmp_path, "conf/b.yaml", "agents: {Solo: {}}\nstore: {url: 'sqlite:///urls.db'}\n")
    async with Agency.from_config(by_url, models=ScriptedModel(["ok"])) as agency:
        assert isinstance(agency.thread_manager.store, SQLThreadStore)
        await agency.get_response("hi")
    assert (tmp_path / "conf" / "urls.db").is_file()


def test_memory_store_and_no_store_keep_threads_in_memory(tmp_path: Path) -> None:
    for text in ("agents: {Solo: {}}\nstore: {type: memory}\n", "agents: {Solo: {}}\n"):
        agency = Agency.from_config(write(tmp_path, "a.yaml", text))
        assert agency.thread_manager.store is None  # the default: the threads in memory are the store


async def test_store_url_from_an_environment_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    database = tmp_path / "env.db"
    monkeypatch.setenv("AGENCY_TEST_DB", f"sqlite:///{database}")
    path = write(tmp_path, "a.yaml", "agents: {Solo: {}}\nstore: {url_env: AGENCY_TEST_DB}\n")
    async with Agency.from_config(path, models=ScriptedModel(["ok"])) as agency:
        await agency.get_response("hi")
    assert database.is_file()


def test_a_postgres_url_without_password_builds_a_store_without_connecting(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", "agents: {Solo: {}}\nstore: {url: 'postgresql+asyncpg://app@127.0.0.1:9/chats'}\n")
    store = Agency.from_config(path).thread_manager.store
    assert isinstance(store, SQLThreadStore)
    assert store.url == "postgresql+asyncpg://app@127.0.0.1:9/chats"


def test_keyword_arguments_override_the_files_store(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", "agents: {Solo: {}}\nstore: {type: file, dir: from_file}\n")
    agency = Agency.from_config(path, threads_dir=tmp_path / "from_caller")
    assert (tmp_path / "from_caller").is_dir()
    assert not (tmp_path / "from_file").exists()
    memory = MemoryThreadStore()
    assert Agency.from_config(path, thread_store=memory).thread_manager.store is memory
    assert isinstance(agency.thread_manager.store, FileThreadStore)
    assert not (tmp_path / "from_file").exists()
    with pytest.raises(ConfigError, match="either thread_store or threads_dir"):
        Agency.from_config(path, thread_store=memory, threads_dir=tmp_path / "x")


# -- bad files: the error names the file, the line and the key; nothing is built ------------------------------


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", 'agents:\n  Lead:\n    instructions: "never closed\n  Dev: {}\n')
    error = load_error(path)
    assert "invalid YAML" in str(error)
    assert "quoted scalar that starts on line 3" in str(error)
    assert error.line == 5


def test_invalid_yaml_indentation(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", "agents:\n  Lead: {}\n bad: indent\n")
    error = load_error(path)
    assert error.line == 3
    assert "invalid YAML" in str(error)


def test_invalid_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text('{\n  "agents": {\n    "Lead": {"temperature": 0.5,}\n  }\n}\n')
    error = load_error(path)
    assert error.line == 3
    assert "invalid JSON" in str(error)


def test_json_duplicate_key(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text('{\n  "agents": {\n    "Lead": {},\n    "Lead": {"model": "x"}\n  }\n}\n')
    error = load_error(path)
    assert "duplicate agent 'Lead' (first defined on line 3)" in str(error)
    assert error.line == 4


def test_unknown_key_names_line_key_and_the_likely_spelling(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", "agents:\n  Lead:\n    description: Leads.\n    tempreature: 0.3\n")
    error = load_error(path)
    assert (error.line, error.key) == (4, "agents.Lead.tempreature")
    assert f"{path}, line 4, key agents.Lead.tempreature: unknown key 'tempreature'." in str(error)
    assert "Did you mean 'temperature'?" in str(error)
    assert "Allowed here: description, model, instructions" in str(error)


def test_unknown_top_level_and_nested_keys(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", "agents: {Lead: {}}\nroutes: {}\n")
    assert load_error(path).key == "routes"
    path = write(tmp_path, "b.yaml", "agents: {Lead: {}}\nchart:\n  supervisor: Lead\n  workerz: []\n")
    error = load_error(path)
    assert (error.line, error.key) == (4, "chart.workerz")
    assert "Did you mean 'workers'?" in str(error)


def test_credentials_are_refused_without_echoing_them(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", "agents:\n  Lead:\n    model: gpt-4.1\n    api_key: offline-SECRET123\n")
    error = load_error(path)
    assert (error.line, error.key) == (4, "agents.Lead.api_key")
    assert "never hold API keys" in str(error)
    assert "OPENAI_API_KEY" in str(error)
    assert "SECRET123" not in str(error)


SECRET = "-".join(("sk", "proj", "Zq9" * 14))  # key-shaped only at run time: the masking needs the shape


@pytest.mark.parametrize(
    ("agent", "where", "problem"),
    [
        (f"toolkits: [[{SECRET}]]", "agents.Lead.toolkits", "toolkits[0]: each toolkit is a name (search) or"),
        ("toolkits: [search, 31415926535]", "agents.Lead.toolkits", "toolkits[1]: each toolkit is a name"),
        (f"toolkits: [{{toolkit: [{SECRET}]}}]", "agents.Lead.toolkits[0].toolkit", "a valid string (got a list)"),
        ("toolkits: 31415926535", "agents.Lead.toolkits", "Input should be a valid list (got an integer)"),
        (f"toolkits: [{SECRET}]", "agents.Lead.toolkits[0]", "unknown toolkit 'sk-***'"),
        (f"max_steps: {SECRET}", "agents.Lead.max_steps", "Input should be a valid integer (got text)"),
        (f"reasoning: {{effort: {SECRET}}}", "agents.Lead.reasoning.effort", "Input should be 'none', 'minimal'"),
        (f"name: {SECRET}", "agents.Lead.name", "`name:` differs from the key 'Lead'"),
        (f"metadata: {{team: [{SECRET}]}}", "agents.Lead.metadata.team", "a valid string (got a list)"),
    ],
)
def test_a_secret_in_the_wrong_place_is_never_printed_back(
    tmp_path: Path, agent: str, where: str, problem: str
) -> None:
    path = write(tmp_path, "a.yaml", f"agents:\n  Lead:\n    model: gpt-4.1\n    {agent}\n")
    error = load_error(path, toolkits=TOOLKITS if "unknown" not in problem else {})
    assert error.key == where
    assert problem in str(error)
    assert SECRET[8:] not in str(error)
    assert "31415926535" not in str(error)


def test_a_store_url_in_url_env_is_not_printed_back(tmp_path: Path) -> None:
    url = "postgresql://app:hunter2-not-real@db.internal:5432/app"
    path = write(tmp_path, "a.yaml", f"agents:\n  Lead:\n    model: gpt-4.1\nstore:\n  type: sql\n  url_env: '{url}'\n")
    error = load_error(path)
    assert error.key == "store.url_env"
    assert "takes the name of an environment variable" in str(error)
    assert "hunter2" not in str(error)
    assert "db.internal" not in str(error)


def test_a_misspelt_setting_is_a_typo_not_a_credential(tmp_path: Path) -> None:
    error = load_error(write(tmp_path, "a.yaml", "agents:\n  Lead:\n    max_token: 100\n"))
    assert "unknown key 'max_token'. Did you mean 'max_tokens'?" in str(error)


def test_wrong_types_name_line_key_and_what_was_found(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", """
    agents:
      Lead:
        temperature: hot
        max_steps: "5"
        toolkits: search
      Dev:
        history_window: 0
    """)
    error = load_error(path)
    assert (error.line, error.key) == (3, "agents.Lead.temperature")
    message = str(error)
    assert "line 3, key agents.Lead.temperature: Input should be a valid number (got text)." in message
    assert "3 more problem(s)" in message
    assert "line 4, key agents.Lead.max_steps: Input should be a valid integer (got text)." in message
    assert "line 5, key agents.Lead.toolkits: Input should be a valid list (got text)." in message
    assert "line 7, key agents.Dev.history_window: Input should be greater than or equal to 1." in message
    assert "hot" not in message  # values are described, never echoed


def test_out_of_range_setting(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", "max_recursion_depth: -1\nagents:\n  Lead: {temperature: 3}\n")
    error = load_error(path)
    assert (error.line, error.key) == (1, "max_recursion_depth")
    assert "line 3, key agents.Lead.temperature: Input should be less than or equal to 2." in str(error)


def test_a_toolkit_entry_that_is_neither_name_nor_mapping(tmp_path: Path) -> None:
    error = load_error(write(tmp_path, "a.yaml", "agents:\n  Lead:\n    toolkits: [3]\n"), toolkits=TOOLKITS)
    assert (error.line, error.key) == (3, "agents.Lead.toolkits")
    assert "each toolkit is a name" in str(error)


def test_top_level_must_be_a_mapping_with_agents(tmp_path: Path) -> None:
    assert "must hold a mapping" in str(load_error(write(tmp_path, "a.yaml", "- just\n- a list\n")))
    assert "must hold a mapping" in str(load_error(write(tmp_path, "b.yaml", "# nothing here\n")))
    error = load_error(write(tmp_path, "c.yaml", "chart: {supervisor: Lead}\n"))
    assert "the required key 'agents' is missing" in str(error)
    error = load_error(write(tmp_path, "d.yaml", "agents: {}\n"))
    assert error.key == "agents"


def test_the_config_file_itself_must_exist_and_be_yaml_or_json(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"must end in \.yaml, \.yml or \.json"):
        Agency.from_config(write(tmp_path, "a.toml", "agents = 1\n"))
    with pytest.raises(ConfigFileError, match="does not exist"):
        Agency.from_config(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match=r"path of a \.yaml"):
        Agency.from_config(42)  # type: ignore[arg-type]


def test_unknown_toolkit_lists_the_known_ones(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", "agents:\n  Lead:\n    toolkits: [search, browser]\n")
    error = load_error(path, toolkits=TOOLKITS)
    assert (error.line, error.key) == (3, "agents.Lead.toolkits[1]")
    assert "unknown toolkit 'browser'. Known toolkits: search, files, email." in str(error)
    error = load_error(path)
    assert "Known toolkits: none (pass from_config(..., toolkits=" in str(error)


def test_unknown_tool_in_a_toolkit_pick(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", """
    agents:
      Lead:
        toolkits:
          - toolkit: files
            tools: [read_file, delete_file]
    """)
    error = load_error(path, toolkits=TOOLKITS)
    assert error.key == "agents.Lead.toolkits[0].tools[1]"
    assert "toolkit 'files' has no tool 'delete_file'; its tools: read_file, write_file." in str(error)


def test_two_toolkits_with_the_same_tool_name(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", "agents:\n  Lead: {toolkits: [files, backup]}\n")
    error = load_error(path, toolkits={**TOOLKITS, "backup": [read_file]})
    assert "toolkits 'files' and 'backup' both have a tool named 'read_file'" in str(error)
    assert error.key == "agents.Lead.toolkits[1]"


@pytest.mark.parametrize(
    ("toolkits", "message"),
    [
        (["search"], "toolkits must be a mapping"),
        ({"search": web_search}, r"toolkits\['search'\] must be a list of tools"),
        ({"search": [print]}, "decorate functions with @function_tool"),
        ({"search": [web_search, web_search]}, "two tools named 'web_search'"),
        ({"": [web_search]}, "toolkit names must be non-empty"),
    ],
)
def test_a_bad_toolkit_registry_is_the_callers_error(tmp_path: Path, toolkits: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Agency.from_config(write(tmp_path, "a.yaml", "agents: {Lead: {}}\n"), toolkits=toolkits)


def test_duplicate_agent_in_the_mapping_form(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", "agents:\n  Lead: {}\n  Dev: {}\n  Lead: {model: x}\n")
    error = load_error(path)
    assert (error.line, error.key) == (4, "agents")
    assert "duplicate agent 'Lead' (first defined on line 2)" in str(error)


def test_duplicate_keys_anywhere_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", "agents:\n  Lead:\n    temperature: 0.1\n    temperature: 0.9\n")
    error = load_error(path)
    assert (error.line, error.key) == (4, "agents.Lead")
    assert "duplicate key 'temperature' (first defined on line 3)" in str(error)


def test_duplicate_agent_in_the_list_form(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", "agents:\n  - name: Lead\n  - name: Dev\n  - name: Lead\n")
    error = load_error(path)
    assert error.line == 4
    assert "duplicate agent 'Lead' (first defined on line 2)" in str(error)


def test_list_form_needs_names_and_keeps_line_numbers(tmp_path: Path) -> None:
    error = load_error(write(tmp_path, "a.yaml", "agents:\n  - name: Lead\n  - description: nameless\n"))
    assert (error.line, error.key) == (3, "agents[1]")
    assert "needs a `name:`" in str(error)
    error = load_error(write(tmp_path, "b.yaml", "agents:\n  - name: Lead\n    temprature: 1\n"))
    assert (error.line, error.key) == (3, "agents.Lead.temprature")


def test_name_inside_the_mapping_form_must_match_its_key(tmp_path: Path) -> None:
    error = load_error(write(tmp_path, "a.yaml", "agents:\n  Lead:\n    name: Boss\n"))
    assert (error.line, error.key) == (3, "agents.Lead.name")
    same = write(tmp_path, "b.yaml", "agents:\n  Lead: {name: Lead}\n")
    assert Agency.from_config(same).agents["Lead"].name == "Lead"


@pytest.mark.parametrize(
    ("agents_text", "message"),
    [
        ("  yes: {}\n", "YAML reads the agent name yes as a boolean; quote it: 'yes'."),
        ("  user: {}\n", "'user' is reserved"),
        ("  A->B: {}\n", "contains '->'"),
        ('  " ": {}\n', "an agent name is empty"),
    ],
)
def test_bad_agent_names(tmp_path: Path, agents_text: str, message: str) -> None:
    error = load_error(write(tmp_path, "a.yaml", "agents:\n" + agents_text))
    assert message in str(error)
    assert error.line == 2


def test_max_steps_and_its_alias_together(tmp_path: Path) -> None:
    error = load_error(write(tmp_path, "a.yaml", "agents:\n  Lead:\n    max_steps: 3\n    max_iterations: 4\n"))
    assert (error.line, error.key) == (4, "agents.Lead.max_iterations")
    assert "not both" in str(error)


def test_chart_naming_an_undefined_agent(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", "agents: {Lead: {}, Dev: {}}\nchart:\n  supervisor: Lead\n  workers: [Dev, Ghost]")
    error = load_error(path)
    assert (error.line, error.key) == (4, "chart.workers[1]")
    assert "the chart names 'Ghost', which is not defined under agents; defined agents: Lead, Dev." in str(error)


def test_undefined_agent_deep_in_departments_and_flows(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", """
    agents: {CEO: {}, Eng: {}, Dev: {}}
    chart:
      supervisor: CEO
      departments:
        - lead: Eng
          departments:
            - lead: Platform
    """)
    error = load_error(path)
    assert (error.line, error.key) == (7, "chart.departments[0].departments[0].lead")
    path = write(tmp_path, "b.yaml", "agents: {A: {}, B: {}}\nchart:\n  entry_points: [A]\n  flows:\n    - [A, B, C]\n")
    assert load_error(path).key == "chart.flows[0][2]"


@pytest.mark.parametrize(
    ("chart", "message", "key"),
    [
        ("{workers: [Dev]}", "workers report to a supervisor", "chart.workers"),
        ("{departments: [{lead: Dev}]}", "departments report to a supervisor", "chart.departments"),
        ("{flows: [[Lead, Dev]]}", "the chart has no entry point", "chart"),
        ("{supervisor: Lead, flows: [[Lead]]}", "a flow lists a sender and at least one recipient", "chart.flows[0]"),
        ("{supervisor: Lead, workers: [Lead]}", "agent 'Lead' cannot message itself", "chart.workers[0]"),
        ("{supervisor: Lead}", "agent 'Dev' is defined but the chart never uses it", "agents.Dev"),
    ],
)
def test_bad_charts(tmp_path: Path, chart: str, message: str, key: str) -> None:
    error = load_error(write(tmp_path, "a.yaml", f"agents: {{Lead: {{}}, Dev: {{}}}}\nchart: {chart}\n"))
    assert message in str(error)
    assert error.key == key


def test_several_agents_need_a_chart(tmp_path: Path) -> None:
    error = load_error(write(tmp_path, "a.yaml", "agents: {Lead: {}, Dev: {}}\n"))
    assert "several agents but no `chart:`" in str(error)


def test_unknown_placeholder_names_agent_placeholder_line_and_the_known_ones(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", """
    agents:
      Lead:
        description: Leads.
        instructions: |
          Memory: {{SHORT_TERM_MEMORY}}
    """)
    model = ScriptedModel(["never"])
    error = load_error(path, models=model)
    assert (error.line, error.key) == (4, "agents.Lead.instructions")
    message = str(error)
    assert "The instructions of agent 'Lead' use the unknown placeholder {{SHORT_TERM_MEMORY}}" in message
    assert "Known placeholders: {{AVAILABLE_AGENTS}}, {{agent_name}}, {{date}}" in message
    assert model.calls == []


def test_unknown_placeholder_in_an_instructions_file_points_at_instructions_file(tmp_path: Path) -> None:
    write(tmp_path, "prompts/lead.md", "Hello {{ Date }}")
    error = load_error(write(tmp_path, "a.yaml", "agents:\n  Lead:\n    instructions_file: prompts/lead.md\n"))
    assert (error.line, error.key) == (3, "agents.Lead.instructions_file")
    assert "{{Date}}" in str(error)
    assert "Did you mean {{date}}?" in str(error)


def test_unknown_placeholder_in_shared_instructions(tmp_path: Path) -> None:
    error = load_error(write(tmp_path, "a.yaml", "shared_instructions: 'Hi {{team}}'\nagents: {Lead: {}}\n"))
    assert (error.line, error.key) == (1, "shared_instructions")
    assert "The agency's shared_instructions use the unknown placeholder {{team}}" in str(error)


def test_instructions_and_instructions_file_together(tmp_path: Path) -> None:
    write(tmp_path, "lead.md", "x")
    error = load_error(write(tmp_path, "a.yaml", "agents:\n  Lead: {instructions: y, instructions_file: lead.md}\n"))
    assert "set instructions or instructions_file, not both" in str(error)


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("../outside.md", "points outside the config file's directory"),
        ("prompts/../../outside.md", "points outside the config file's directory"),
        ("/etc/hostname", "is absolute"),
        ("~/notes.md", "is absolute"),
        ("prompts/escape.md", "is a symlink to a file outside the config file's directory"),
        ("prompts/missing.md", "does not exist"),
        ("prompts", "is a directory"),
    ],
)
def test_instruction_files_must_stay_inside_the_config_directory(
    tmp_path: Path, reference: str, message: str
) -> None:
    (tmp_path / "outside.md").write_text("secret")
    config_dir = tmp_path / "config"
    write(config_dir, "prompts/ok.md", "fine")
    (config_dir / "prompts" / "escape.md").symlink_to(tmp_path / "outside.md")
    text = f"agents:\n  Lead:\n    description: Leads.\n    instructions_file: '{reference}'\n"
    path = write(config_dir, "a.yaml", text)
    error = load_error(path)
    assert (error.line, error.key) == (4, "agents.Lead.instructions_file")
    assert message in str(error)
    assert "secret" not in str(error)


def test_a_non_utf8_instructions_file(tmp_path: Path) -> None:
    (tmp_path / "lead.md").write_bytes(b"\xff\xfe\x00bad")
    error = load_error(write(tmp_path, "a.yaml", "agents:\n  Lead: {instructions_file: lead.md}\n"))
    assert "is not UTF-8 text" in str(error)


def test_yaml_aliases_cannot_blow_up_the_tree(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]" for n in range(1, 9)]
    path = write(tmp_path, "a.yaml", "\n".join([*lines, "agents: {Lead: {description: *a8}}", ""]))
    assert "more than 100000 values" in str(load_error(path))


@pytest.mark.parametrize(
    ("store", "message", "key"),
    [
        ("{dir: threads}", "set the store's `type:`", "store"),
        ("{type: file}", "a store with type: file needs `dir:`", "store"),
        ("{type: sqlite}", "a store with type: sqlite needs `path:`", "store"),
        ("{type: file, path: x.db}", "a file store takes dir, durable, not 'path'", "store.path"),
        ("{type: memory, dir: x}", "a memory store takes nothing else, not 'dir'", "store.dir"),
        ("{type: sql}", "a sql store takes one of `url:` or `url_env:`", "store"),
        ("{type: redis}", "Input should be 'memory', 'file', 'sqlite' or 'sql'", "store.type"),
        ("{url: 'mysql://db/x'}", "Unsupported thread store URL scheme 'mysql'", "store.url"),
        ("{url_env: AGENCY_TEST_UNSET}", "the environment variable AGENCY_TEST_UNSET is not set", "store.url_env"),
    ],
)
def test_bad_store_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store: str, message: str, key: str
) -> None:
    monkeypatch.delenv("AGENCY_TEST_UNSET", raising=False)
    error = load_error(write(tmp_path, "a.yaml", f"agents: {{Solo: {{}}}}\nstore: {store}\n"))
    assert message in str(error)
    assert error.key == key


@pytest.mark.parametrize(
    "url", ["postgresql://app:Hunter2Secret@db.example/chats", "postgresql://app@db.example/chats?password=Hunter2Secret"]
)
def test_a_password_in_the_store_url_is_refused_and_not_repeated(tmp_path: Path, url: str) -> None:
    error = load_error(write(tmp_path, "a.yaml", f"agents: {{Solo: {{}}}}\nstore: {{url: '{url}'}}\n"))
    assert "holds a password" in str(error)
    assert "url_env" in str(error)
    assert "Hunter2Secret" not in str(error)
    assert error.key == "store.url"


def test_a_bad_file_creates_no_store_and_runs_nothing(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", """
    store: {type: file, dir: threads}
    agents: {Lead: {}, Dev: {}}
    chart: {supervisor: Lead, workers: [Dev, Ghost]}
    """)
    model = ScriptedModel(["never"])
    load_error(path, models=model)
    assert not (tmp_path / "threads").exists()
    assert model.calls == []


def test_config_file_error_is_a_config_error_with_where(tmp_path: Path) -> None:
    error = load_error(write(tmp_path, "a.yaml", "agents:\n  Lead: {top_p: 2}\n"))
    assert isinstance(error, ConfigError)
    assert isinstance(error, ValueError)
    assert (error.path, error.line, error.key) == (str(tmp_path / "a.yaml"), 2, "agents.Lead.top_p")


def test_yaml_tags_that_build_python_objects_are_refused(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = write(tmp_path, "a.yaml", f"""
    agents:
      Lead:
        description: !!python/object/apply:os.system ["touch {marker}"]
    """)
    error = load_error(path)
    assert "invalid YAML" in str(error)
    assert error.line == 3
    assert not marker.exists()


def test_the_documented_complete_example_loads(tmp_path: Path) -> None:
    doc = (Path(__file__).parents[2] / "docs" / "design" / "config.md").read_text()
    example = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    write(tmp_path, "prompts/eng_lead.md", "Lead engineering; your team:\n{{AVAILABLE_AGENTS}}")
    path = write(tmp_path, "agency.yaml", example)
    toolkits = {"files": [read_file, write_file], "search": [web_search], "email": [send_email]}
    agency = Agency.from_config(path, toolkits=toolkits)
    assert agency.communication_flows == [
        ("CEO", "EngLead"), ("CEO", "SalesLead"), ("EngLead", "Developer"), ("EngLead", "QA"), ("SalesLead", "Rep"),
    ]
    assert [tool.name for tool in agency.agents["QA"].tools] == ["read_file"]
    assert [tool.name for tool in agency.agents["Rep"].tools] == ["web_search", "send_email"]
    assert agency.agents["EngLead"].max_steps == 12
    assert agency.max_recursion_depth == 4
    assert isinstance(agency.thread_manager.store, FileThreadStore)


def test_many_problems_are_listed_up_to_a_limit(tmp_path: Path) -> None:
    agents = "".join(f"  Agent{number}: {{temperature: hot}}\n" for number in range(30))
    error = load_error(write(tmp_path, "a.yaml", "agents:\n" + agents))
    message = str(error)
    assert error.key == "agents.Agent0.temperature"
    assert "29 more problem(s)" in message
    assert "key agents.Agent20.temperature" in message
    assert "key agents.Agent21.temperature" not in message
    assert "... and 9 more" in message


def test_a_toolkit_tool_named_send_message_clashes_only_for_agents_that_send(tmp_path: Path) -> None:
    @function_tool(name_override="send_message")
    def own_send(text: str) -> str:
        """Send a message somewhere else."""
        return text

    path = write(tmp_path, "a.yaml", """
    store: {type: file, dir: threads}
    agents:
      Lead:
        toolkits: [chat]
      Dev:
        toolkits: [chat]
    chart: {supervisor: Lead, workers: [Dev]}
    """)
    error = load_error(path, toolkits={"chat": [own_send]})
    assert (error.line, error.key) == (4, "agents.Lead.toolkits")
    assert "'send_message' is reserved" in str(error)
    assert not (tmp_path / "threads").exists()
    alone = write(tmp_path, "b.yaml", "agents:\n  Dev: {toolkits: [chat]}\n")
    assert [tool.name for tool in Agency.from_config(alone, toolkits={"chat": [own_send]}).agents["Dev"].tools] == [
        "send_message"
    ]


def test_importing_the_package_loads_neither_yaml_nor_the_schema() -> None:
    import subprocess
    import sys

    code = (
        "import sys, agency_swarm; "
        "print(sorted(m for m in ('yaml', 'agency_swarm._config._schema') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


RETRIES = """
retry: {max_attempts: 5, initial_delay: 0.1, max_delay: 2, jitter: false, max_retry_after: 30}
show_tool_errors: false
agents:
  Lead:
    description: Leads.
  Careful:
    description: Retries less and shows tool errors.
    retry: {max_attempts: 1}
    show_tool_errors: true
chart: {supervisor: Lead, workers: [Careful]}
"""


def test_retry_and_tool_errors_come_from_the_file_for_the_agency_and_per_agent(tmp_path: Path) -> None:
    from agency_swarm import RetryPolicy

    agency = Agency.from_config(write(tmp_path, "a.yaml", RETRIES))
    assert agency.retry == RetryPolicy(
        max_attempts=5, initial_delay=0.1, max_delay=2.0, jitter=False, max_retry_after=30.0
    )
    assert agency.show_tool_errors is False
    lead, careful = agency.agents["Lead"], agency.agents["Careful"]
    assert (lead.retry, lead.show_tool_errors) == (None, None)  # the agency's defaults apply to it
    assert careful.retry == RetryPolicy(max_attempts=1)
    assert careful.show_tool_errors is True


def test_a_bad_retry_names_its_line_and_key(tmp_path: Path) -> None:
    error = load_error(write(tmp_path, "a.yaml", "agents:\n  Lead:\n    retry: {max_attempts: 0}\n"))
    assert (error.line, error.key) == (3, "agents.Lead.retry.max_attempts")
    assert "greater than or equal to 1" in str(error)
    error = load_error(write(tmp_path, "b.yaml", "retry: {attempts: 3}\nagents:\n  Lead: {}\n"))
    assert (error.line, error.key) == (1, "retry.attempts")
    assert "max_attempts" in str(error)  # the keys allowed there are listed
