"""mkdocs hooks (mkdocs.yml `hooks:`): pages that hold what the code says, generated at every build.

A page asks for a part with an HTML comment on a line of its own:
- `<!-- generated: cli-help -->`: `agency-swarm --help` and each command's help, as the installed CLI prints them;
- `<!-- generated: openapi -->`: the HTTP API's operations, from the schema `scripts/openapi.py` writes, which is
  published next to the site as `openapi.json`;
- `<!-- generated: config-schema -->`: the config file's JSON Schema, from the pydantic models that validate it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ((), ("run",), ("serve",), ("visualize",), ("demo",))
HELP_WIDTH = "100"


def _openapi_schema() -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location("agency_swarm_openapi_script", ROOT / "scripts" / "openapi.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    schema: dict[str, Any] = module.schema()
    return schema


def cli_help() -> str:
    env = {**os.environ, "COLUMNS": HELP_WIDTH, "NO_COLOR": "1", "TERM": "dumb"}
    env.pop("FORCE_COLOR", None)
    parts = []
    for command in COMMANDS:
        done = subprocess.run(
            [sys.executable, "-m", "agency_swarm", *command, "--help"], capture_output=True, text=True,
            env=env, timeout=60, check=True,
        )
        text = "\n".join(line.rstrip() for line in done.stdout.strip("\n").splitlines())
        parts.append(f"## `{' '.join(('agency-swarm', *command))}`\n\n```text\n{text}\n```\n")
    return "\n".join(parts)


def openapi_table(schema: dict[str, Any]) -> str:
    rows = ["| method | path | what it does |", "|---|---|---|"]
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            summary = (operation.get("description") or operation.get("summary") or "").split("\n")[0]
            rows.append(f"| `{method.upper()}` | `{path}` | {summary.replace('|', '&#124;')} |")
    return "\n".join(rows) + "\n"


def config_schema() -> str:
    from agency_swarm._config._schema import FileSpec

    return "```json\n" + json.dumps(FileSpec.model_json_schema(), indent=2) + "\n```\n"


def on_page_markdown(markdown: str, **_: Any) -> str:
    generated = {
        "<!-- generated: cli-help -->": cli_help,
        "<!-- generated: openapi -->": lambda: openapi_table(_openapi_schema()),
        "<!-- generated: config-schema -->": config_schema,
    }
    for marker, make in generated.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown


def on_files(files: Any, config: Any, **_: Any) -> Any:
    """The schema joins the site as openapi.json, so pages link to it and the build checks those links."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, "openapi.json", content=json.dumps(_openapi_schema(), indent=2) + "\n"))
    return files
