"""Run the HR assistant once: `.venv/bin/python examples/agent_factory/main.py [--request "..."]`.

Offline with scripted models unless OPENAI_API_KEY is set (then every agent uses gpt-4.1-mini).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import agents
from agents import Model

from agency_swarm import Agency, Event, RunResult

if __package__ in (None, ""):  # run as a script: make the package importable from examples/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent_factory.config import DOMAIN_DESCRIPTION, DOMAIN_NAME, SUB_AGENTS
from agent_factory.hr_tools import TOOL_FUNCTIONS, HRDatabase, sample_database
from agent_factory.observability import Observer
from agent_factory.offline import scripted_models
from agent_factory.orchestration import ORCHESTRATION_AGENTS, build_agency
from agent_factory.registry import SubAgentRegistry

OPENAI_MODEL = "gpt-4.1-mini"
DEFAULT_REQUEST = (
    "I'm employee E100. What was on my last pay stub? And please book leave from 2025-07-14 to 2025-07-18 "
    "for a family trip."
)


def default_registry() -> SubAgentRegistry:
    return SubAgentRegistry(
        domain_name=DOMAIN_NAME, domain_description=DOMAIN_DESCRIPTION, sub_agents=SUB_AGENTS,
        tool_functions=TOOL_FUNCTIONS,
    )


@dataclass(kw_only=True)
class Outcome:
    result: RunResult
    agency: Agency
    observer: Observer
    database: HRDatabase
    events: list[Event]


async def run(
    request: str,
    *,
    registry: SubAgentRegistry,
    models: Mapping[str, Model | str],
    out: TextIO,
    database: HRDatabase | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Outcome:
    """One request through triage -> plan -> execute -> review -> summary, traced to `out` as it streams."""
    agency = build_agency(registry, lambda name: models[name])
    database = sample_database() if database is None else database
    observer = Observer(out, show_output_of=ORCHESTRATION_AGENTS, clock=clock)
    out.write(f"user -> coordinator: {request}\n")
    events: list[Event] = []
    stream = agency.get_response_stream(request, context=database)
    async with stream:
        async for event in stream:
            events.append(event)
            observer.observe(event)
    out.write(f"\ncoordinator: {stream.result.final_output}\n\n{observer.report()}\n")
    return Outcome(result=stream.result, agency=agency, observer=observer, database=database, events=events)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--request", default=DEFAULT_REQUEST, help="what the employee asks")
    args = parser.parse_args(argv)
    registry = default_registry()
    models: Mapping[str, Model | str]
    if os.environ.get("OPENAI_API_KEY"):
        print(f"Using OpenAI model {OPENAI_MODEL} (OPENAI_API_KEY is set)")
        models = {name: OPENAI_MODEL for name in scripted_models(registry)}
    else:
        print("Using scripted offline models (set OPENAI_API_KEY to use a real model)")
        agents.set_tracing_disabled(True)
        models = scripted_models(registry)
    asyncio.run(run(args.request, registry=registry, models=models, out=sys.stdout))
    return 0


if __name__ == "__main__":
    sys.exit(main())
