"""The same Manager, unchanged, in a team without and then with an Engineer: its prompt's {{AVAILABLE_AGENTS}}
follows the chart. `.venv/bin/python examples/available_agents/main.py [--request ...]`. Offline with scripted
models unless OPENAI_API_KEY is set (then gpt-4.1-mini)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path

import agents
from agents import Model

if __package__ in (None, ""):  # run as a script: make the package importable from examples/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from available_agents.offline import scripted_models
from available_agents.team import MANAGER, PromptLog, build_manager, build_team

OPENAI_MODEL = "gpt-4.1-mini"
DEFAULT_REQUEST = "Write a Python script that counts the lines in report.txt."
TEAMS = (["Researcher", "Memory"], ["Researcher", "Memory", "Engineer"])


def choose_models() -> Mapping[str, Model | str]:
    """A real model for every agent when OPENAI_API_KEY is set, else the scripted stand-ins."""
    if os.environ.get("OPENAI_API_KEY"):
        print(f"Using OpenAI model {OPENAI_MODEL} (OPENAI_API_KEY is set)")
        return dict.fromkeys(scripted_models(), OPENAI_MODEL)
    print("Using scripted offline models (set OPENAI_API_KEY to use a real model)")
    agents.set_tracing_disabled(True)
    return scripted_models()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="{{AVAILABLE_AGENTS}} follows the chart.")
    parser.add_argument("--request", default=DEFAULT_REQUEST)
    args = parser.parse_args(argv)
    models = choose_models()
    prompt_log = PromptLog()
    manager = build_manager(models[MANAGER], prompt_log)  # one Manager object, its instructions never edited
    for number, members in enumerate(TEAMS, start=1):
        print(f"\n=== Team {number}: the same {MANAGER} may message {', '.join(members)}")
        first_prompt = len(prompt_log.prompts)
        agency = build_team(manager, members, lambda name: models[name])
        result = agency.get_response_sync(args.request)
        print(f"{MANAGER}'s model received these instructions:")
        for line in (prompt_log.prompts[first_prompt] or "").splitlines():
            print(f"  | {line}")
        print(f"user -> {MANAGER}: {args.request}")
        print(f"{MANAGER}: {result.final_output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
