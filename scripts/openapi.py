"""Write the HTTP API's OpenAPI schema (what `GET /openapi.json` serves) to a file: `python scripts/openapi.py OUT`.

The schema does not depend on the agency served, so a one-agent agency on the memory store stands in for yours.
The documentation site's build (scripts/docs_hooks.py) publishes it as openapi.json and lists its operations.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def schema() -> dict[str, Any]:
    from agency_swarm import Agency, Agent
    from agency_swarm.serving import create_app
    from agency_swarm.testing import ScriptedModel

    def build(store: Any) -> Agency:
        return Agency(Agent(name="CEO", model=ScriptedModel(["hi"])), thread_store=store)

    spec: dict[str, Any] = create_app(build, store="memory").openapi()
    return spec


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python scripts/openapi.py OUT.json", file=sys.stderr)
        return 2
    Path(argv[0]).write_text(json.dumps(schema(), indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
