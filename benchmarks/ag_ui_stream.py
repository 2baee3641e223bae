"""What an AG-UI stream costs the server over our own SSE: per event, translating to `ag_ui.core` events and encoding
them, against encoding our event as `messages:stream` does; and the bytes each sends.

    .venv/bin/python benchmarks/ag_ui_stream.py              # prints the table
    .venv/bin/python benchmarks/ag_ui_stream.py --words 50   # quick

Method: a nested CEO -> Developer -> QA turn on zero-latency ScriptedModels, each agent answering `--words` words (one
text delta per word, as the scripted model streams them), is recorded once; its events (raw ones left out, as both
endpoints leave them out by default) are then encoded `--repeat` times each way, timed with perf_counter.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from agency_swarm import Agency, Agent, Event
from agency_swarm.serving._ag_ui._route import chunk
from agency_swarm.serving._ag_ui._translate import Translator
from agency_swarm.serving._sse import _sse_chunk
from agency_swarm.testing import ModelCall, ScriptedModel, Step, send_message


def team(words: int) -> Agency:
    answer = " ".join(f"word{n}" for n in range(words))

    def delegate(to: str | None) -> Any:
        def script(call: ModelCall) -> Step:
            return send_message(to, "go") if to and not call.tool_outputs else answer
        return ScriptedModel(script)

    ceo, dev, qa = (Agent(name=name, model=delegate(to)) for name, to in
                    (("CEO", "Developer"), ("Developer", "QA"), ("QA", None)))
    return Agency([ceo, [ceo, dev], [dev, qa]])


async def recorded(words: int) -> tuple[list[Event], Any]:
    stream = team(words).get_response_stream("Build it", chat_id="bench")
    events = [event async for event in stream if event.type != "raw"]
    return events, stream.result


def ours(events: list[Event], result: Any) -> int:
    return sum(len(_sse_chunk(event.type, event.to_dict())) for event in events)


def ag_ui(events: list[Event], result: Any) -> int:
    translator = Translator("bench", "run-1")
    size = sum(len(chunk(e)) for e in translator.started())
    for event in events:
        size += sum(len(chunk(e)) for e in translator.event(event.to_dict()))
    return size + sum(len(chunk(e)) for e in translator.finished(result))


def timed(encode: Any, events: list[Event], result: Any, repeat: int) -> tuple[float, int]:
    size = encode(events, result)
    started = time.perf_counter()
    for _ in range(repeat):
        encode(events, result)
    return (time.perf_counter() - started) / repeat / len(events) * 1e6, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=20)
    options = parser.parse_args()
    events, result = asyncio.run(recorded(options.words))
    print(f"{len(events)} events of a nested turn, three answers of {options.words} words\n")
    print("| stream | µs per event | bytes sent |")
    print("|---|---:|---:|")
    for name, encode in (("messages:stream (ours)", ours), ("/ag-ui (AG-UI)", ag_ui)):
        per_event, size = timed(encode, events, result, options.repeat)
        print(f"| {name} | {per_event:.1f} | {size:,} |")


if __name__ == "__main__":
    main()
