"""Answer a question with planner / executor / verifier agents and a shared memory; every step goes to a JSON Lines
audit log. `.venv/bin/python examples/agentflow/main.py [--question ...] [--image [PATH_OR_URL]] [--log-dir DIR]
[--max-steps N] [--max-time SECONDS]`. Offline with scripted models unless OPENAI_API_KEY is set (then gpt-4.1-mini);
offline, without a question, it asks about the flag in flag.png, which every agent's model receives."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import agents
from agents import Model

from agency_swarm import AgentFinished, AgentStarted, Event, MessageSent, ToolCalled

if __package__ in (None, ""):  # run as a script: make the package importable from examples/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentflow.offline import scripted_models
from agentflow.solver import Limits, Solution, solve
from agentflow.team import SOLVER, build_agency

OPENAI_MODEL = "gpt-4.1-mini"
DEFAULT_QUESTION = "What is the population density of Lumaria, in people per square kilometre?"
IMAGE_QUESTION = "What is the population density of the country whose flag this is, in people per square kilometre?"
FLAG = Path(__file__).resolve().parent / "flag.png"
"""A tiny flag (6x4 pixels): what the offline run asks about, and `--image` alone."""


def show(event: Event) -> None:
    pad = "  " * event.depth
    match event:
        case MessageSent(agent=agent, recipient=recipient, message=message):
            print(f"{pad}{agent} -> {recipient}: {' | '.join(message.splitlines())}")
        case ToolCalled(agent=agent, tool=tool, arguments=arguments):
            print(f"{pad}{agent} calls {tool}({arguments})")
        case AgentFinished(agent=agent, output=output) if event.depth > 0:
            dump = getattr(output, "model_dump_json", None)
            print(f"{pad}{agent}: {dump() if callable(dump) else output}")
        case AgentStarted(depth=0, message=message):
            print(f"user -> {SOLVER}: {message}")
        case _:
            pass


def report(solution: Solution) -> None:
    print(f"\nAnswer: {solution.answer}")
    print(f"Stopped because: {solution.stop_reason}")
    print(f"Steps: {solution.steps}; memory:")
    for action in solution.memory.actions:
        print(f"  step {action.step} {action.tool}({action.command}) -> {action.result}")
    print(f"Audit log: {solution.log_path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Planner / executor / verifier with memory and an audit log.")
    parser.add_argument("--question", default=None)
    parser.add_argument("--image", nargs="?", const=str(FLAG), default=None,
                        help="a path or http(s) URL of an image every agent sees (alone: the example's flag)")
    parser.add_argument("--log-dir", type=Path, default=None, help="where the audit log goes (default: a temp dir)")
    parser.add_argument("--max-steps", type=int, default=5)
    parser.add_argument("--max-time", type=float, default=120.0, help="seconds")
    args = parser.parse_args(argv)
    try:
        limits = Limits(max_steps=args.max_steps, max_time=args.max_time)
    except ValueError as error:
        parser.error(str(error))
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="agentflow-"))
    if log_dir.exists() and not log_dir.is_dir():
        parser.error(f"--log-dir {log_dir} exists and is not a directory")
    models: Mapping[str, Model | str]
    offline = not os.environ.get("OPENAI_API_KEY")
    if not offline:
        print(f"Using OpenAI model {OPENAI_MODEL} (OPENAI_API_KEY is set)")
        models = dict.fromkeys(scripted_models(), OPENAI_MODEL)
    else:
        print("Using scripted offline models (set OPENAI_API_KEY to use a real model)")
        agents.set_tracing_disabled(True)
        models = scripted_models()
    agency = build_agency(lambda name: models[name])
    image = args.image if args.image or args.question or not offline else str(FLAG)
    question = args.question or (IMAGE_QUESTION if image else DEFAULT_QUESTION)
    solution = asyncio.run(solve(agency, question, image=image, log_dir=log_dir, limits=limits, on_event=show))
    report(solution)
    return 0


if __name__ == "__main__":
    sys.exit(main())
