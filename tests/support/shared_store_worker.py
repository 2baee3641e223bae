"""A long-lived process holding one agency on a shared store: each line on stdin runs one turn of a chat.

`python shared_store_worker.py STORE_URL NAME` reads lines `CHAT MESSAGE` and answers each with one JSON line:
the user messages the model saw, in order. The model answers "NAME: MESSAGE", so the history shows who wrote what.
A line `CHAT MESSAGE *N` runs N turns back to back (messages MESSAGE0 ... MESSAGE<N-1>) and answers with the last.
"""

from __future__ import annotations

import asyncio
import json
import sys

from agency_swarm import Agency, Agent, SQLThreadStore
from agency_swarm.testing import ModelCall, ScriptedModel


def seen(call: ModelCall) -> list[str]:
    return [item["content"] for item in call.input if item.get("role") == "user"]


async def main(url: str, name: str) -> None:
    model = ScriptedModel(lambda call: f"{name}: {call.last_user_message}")
    agency = Agency(Agent(name="Helper", model=model), thread_store=SQLThreadStore(url))
    loop = asyncio.get_running_loop()
    async with agency:
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            chat, _, message = line.strip().partition(" ")
            message, _, times = message.partition(" *")
            for turn in range(int(times)) if times else [None]:
                await agency.get_response(message if turn is None else f"{message}{turn}", chat_id=chat)
            print(json.dumps(seen(model.calls[-1])), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
