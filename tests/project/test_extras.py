"""A missing optional extra (serve, postgres, durable, litellm) is one clear message naming the extra and the command
that installs it, wherever it is needed: run in a subprocess where the extra's module is missing (None in
sys.modules, which is how Python marks a module that cannot be imported)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

AGENCY = "agents:\n  CEO: {description: Talks to the user., model: gpt-4.1-mini}\nchart: {supervisor: CEO}\n"
POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"  # never reached: the extra is missing first


def without(modules: list[str], code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `code` in a new interpreter in which `modules` cannot be imported."""
    hide = "".join(f"sys.modules[{module!r}] = None\n" for module in modules)
    env = {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"}
    return subprocess.run(
        [sys.executable, "-c", f"import sys\n{hide}{code}"], capture_output=True, text=True, timeout=120,
        check=False, cwd=cwd, env=env,
    )


def cli(arguments: list[str]) -> str:
    return f"from agency_swarm.__main__ import main\nsys.exit(main({arguments!r}))"


def message(extra: str, module: str) -> str:
    return f'needs the {extra} extra ({module} is not installed): pip install ".[{extra}]" in a clone of agency_swarm'


@pytest.mark.parametrize(("module", "extra"), [("fastapi", "serve"), ("uvicorn", "serve")])
def test_serve_without_the_serve_extra_is_one_line_and_exit_2(tmp_path: Path, module: str, extra: str) -> None:
    (tmp_path / "agency.yaml").write_text(AGENCY)
    done = without([module], cli(["serve", "agency.yaml"]), tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: ")
    assert message(extra, module) in line


@pytest.mark.parametrize("module", ["dbos", "asyncpg"])
def test_serve_durable_without_the_durable_extra_is_one_line(tmp_path: Path, module: str) -> None:
    (tmp_path / "agency.yaml").write_text(AGENCY)
    done = without([module], cli(["serve", "agency.yaml", "--durable", "--store", POSTGRES]), tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert message("durable", module) in line


@pytest.mark.parametrize(
    ("modules", "import_line", "extra", "module"),
    [
        (["fastapi"], "import agency_swarm.serving", "serve", "fastapi"),
        (["dbos"], "import agency_swarm.durable", "durable", "dbos"),
        (["asyncpg"], "import agency_swarm.durable", "durable", "asyncpg"),
        (["asyncpg"], "from agency_swarm.durable import DurableTurns", "durable", "asyncpg"),
    ],
)
def test_importing_a_module_of_an_extra_says_which_extra(
    tmp_path: Path, modules: list[str], import_line: str, extra: str, module: str
) -> None:
    code = f"try:\n    {import_line}\nexcept ModuleNotFoundError as missing:\n    print(missing.name, '|', missing)\n"
    done = without(modules, code, tmp_path)
    assert done.returncode == 0, done.stderr
    name, _, text = done.stdout.strip().partition(" | ")
    assert name == module  # still a ModuleNotFoundError naming the module, for code that catches ImportError
    assert text.startswith(f"agency_swarm.{'serving' if extra == 'serve' else 'durable'} {message(extra, module)}")


def test_create_app_durable_and_a_postgres_store_without_their_extras_raise_config_errors(tmp_path: Path) -> None:
    code = """
from agency_swarm import Agency, Agent, ConfigError, SQLThreadStore
from agency_swarm.serving import create_app
for attempt in (
    lambda: SQLThreadStore("postgresql://postgres@127.0.0.1:5432/test"),
    lambda: create_app(lambda store: Agency(Agent(name="CEO"), thread_store=store), store="memory",
                       durable={"database_url": "postgresql://postgres@127.0.0.1:5432/test"}),
):
    try:
        attempt()
    except ConfigError as error:
        print(error)
"""
    done = without(["asyncpg"], code, tmp_path)
    assert done.returncode == 0, done.stderr
    store, durable = done.stdout.splitlines()
    assert store.startswith(f"Thread store URL {POSTGRES!r} {message('postgres', 'asyncpg')}")
    assert durable.startswith(f"agency_swarm.durable {message('durable', 'asyncpg')}")


def test_a_litellm_model_without_the_litellm_extra_names_it(tmp_path: Path) -> None:
    code = """
from agency_swarm import Agency, Agent, ConfigError
try:
    Agency(Agent(name="Claude", model="litellm/anthropic/claude-3-5-sonnet")).get_response_sync("hi")
except ConfigError as error:
    print(error)
"""
    done = without(["litellm"], code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        f"Agent 'Claude' uses model 'litellm/anthropic/claude-3-5-sonnet', which {message('litellm', 'litellm')}"
    )
