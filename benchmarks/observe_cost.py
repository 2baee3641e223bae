"""What authentication, tracing and metrics cost per turn, measured without a network: CPU time per turn of the
served app driven as ASGI in one process, nothing on against each of them on.

    .venv/bin/python benchmarks/observe_cost.py                 # 5 rounds x 800 turns per condition
    .venv/bin/python benchmarks/observe_cost.py --rounds 9 --turns 1500

Method: each condition runs in a fresh process (telemetry is process-wide and read from the environment when the
app is made): `create_app` of one agent with a scripted model that answers at once, on PostgreSQL, with the
condition's options (`auth=AuthSettings(jwt_secret=...)` and each chat's user's HS256 JWT; the OTLP endpoint
variable pointing at a receiver in the parent process; `metrics=True` with PROMETHEUS_MULTIPROC_DIR set, as
`serve --metrics` runs). The process sends warm-up turns, then `--turns` turns one after another, eight chats in
turn (`POST /chats/{id}/messages`, called as ASGI: no sockets, no HTTP parsing), flushes its spans (the export
thread's encoding and posting done) and reports its CPU time (every thread) per turn. Conditions alternate within
each round; a row shows the median run and the median of each round's overhead over that round's run with nothing
on. The base leaves out what uvicorn and the sockets cost, so a share of it is larger than a share of a served turn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from serving_load import STRETCHED_FLUSHES, callgrind_total  # noqa: E402  (the next file in this folder)

CONDITIONS = ("nothing on", "auth (JWT)", "tracing (OTLP)", "metrics", "all three",
              "tracing (OTLP, sampled 10 %)", "all three (tracing sampled 10 %)")
SECRET = "offline-benchmark-secret-" + "x" * 32
ISSUER, AUDIENCE = "https://id.bench.example", "agency-bench"
CHATS = 8


def _environment(name: str, receiver_url: str, scratch: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "PROMETHEUS_"))}
    if name.startswith(("tracing", "all three")):
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver_url
    if "sampled" in name:
        env["OTEL_TRACES_SAMPLER"], env["OTEL_TRACES_SAMPLER_ARG"] = "parentbased_traceidratio", "0.1"
    if name.startswith(("metrics", "all three")):
        env["PROMETHEUS_MULTIPROC_DIR"] = scratch
    return env


def run_condition(name: str, turns: int, receiver_url: str) -> float:
    """CPU ms per turn of one fresh process serving `turns` turns under condition `name`."""
    with tempfile.TemporaryDirectory(prefix="observe-cost-") as scratch:
        done = subprocess.run(
            [sys.executable, __file__, "--child", name, "--turns", str(turns)],
            env=_environment(name, receiver_url, scratch), capture_output=True, text=True, timeout=600,
        )
    if done.returncode != 0:
        raise SystemExit(f"{name}: the measuring process failed:\n{done.stderr[-3000:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["cpu_ms_per_turn"])


# -- the measuring process -------------------------------------------------------------------------------------


def _app(name: str) -> Any:
    import agents
    from serving_load import POSTGRES_URL

    from agency_swarm import Agency, Agent
    from agency_swarm.serving import AuthSettings, create_app
    from agency_swarm.testing import ScriptedModel

    agents.set_tracing_disabled(True)

    def factory(store: Any) -> Any:
        return Agency(Agent(name="Assistant", model=ScriptedModel(lambda call: "noted")), thread_store=store)

    auth = AuthSettings(jwt_secret=SECRET, issuer=ISSUER, audience=AUDIENCE) if name.startswith(
        ("auth", "all three")) else None
    return create_app(factory, store=POSTGRES_URL, auth=auth, metrics=name.startswith(("metrics", "all three")))


def _headers(name: str, chat: int) -> list[tuple[bytes, bytes]]:
    headers = [(b"content-type", b"application/json"), (b"host", b"bench")]
    if name.startswith(("auth", "all three")):
        import jwt

        claims = {"sub": f"user-{chat}", "iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 3600}
        headers.append((b"authorization", f"Bearer {jwt.encode(claims, SECRET, algorithm='HS256')}".encode()))
    return headers


async def _post(app: Any, path: str, headers: list[tuple[bytes, bytes]], body: bytes) -> int:
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
             "headers": [*headers, (b"content-length", str(len(body)).encode())],
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000)}
    sent = False
    status = [0]

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            await asyncio.Event().wait()  # the client stays connected
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status[0] = message["status"]

    await app(scope, receive, send)
    return status[0]


async def _serve(name: str, turns: int) -> float:
    import gc
    import uuid

    app = _app(name)
    gc.collect()
    gc.freeze()  # as `serve` does once a worker's app is built: what startup made is out of the collector's sight
    prefix = f"bench-observe-{uuid.uuid4().hex[:8]}-"
    headers = [_headers(name, chat) for chat in range(CHATS)]
    body = json.dumps({"message": "hello"}).encode()

    async def turn(index: int) -> None:
        chat = index % CHATS
        status = await _post(app, f"/chats/{prefix}{chat}/messages", headers[chat], body)
        if status != 200:
            raise SystemExit(f"turn failed with {status}")

    async with app.router.lifespan_context(app):
        for index in range(100):
            await turn(index)
        _flush()
        gc.collect()
        began = time.process_time()
        for index in range(turns):
            await turn(index)
        _flush()
        cpu = time.process_time() - began
        from serving_load import delete_chats

        await delete_chats(prefix)
    return cpu / turns * 1000


def _flush() -> None:
    from agency_swarm._telemetry._otel import flush_traces

    flush_traces()


# -- the table ----------------------------------------------------------------------------------------------------


def print_table(runs: dict[str, list[float]]) -> None:
    bases = runs["nothing on"]
    base = statistics.median(bases)
    print("| condition | CPU ms/turn (median) | runs | overhead | overhead, paired by round (median) |")
    print("|---|---:|---|---:|---:|")
    for name, values in runs.items():
        median = statistics.median(values)
        every = " ".join(f"{value:.3f}" for value in values)
        overhead = paired = "–"
        if name != "nothing on":
            overhead = f"{(median - base) / base * 100:+.1f} %"
            paired = f"{statistics.median(v / b - 1 for v, b in zip(values, bases, strict=True)) * 100:+.1f} %"
        print(f"| {name} | {median:.3f} | {every} | {overhead} | {paired} |", flush=True)


def count_instructions(name: str, receiver_url: str, turns: int) -> int:
    """Instructions (callgrind's Ir, every thread) of one process serving `turns` measured turns."""
    with tempfile.TemporaryDirectory(prefix="observe-cost-") as scratch:
        out = Path(scratch) / "callgrind.out"
        env = {**_environment(name, receiver_url, scratch), **STRETCHED_FLUSHES}  # batches as full as at full speed
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__, "--child", name,
             "--turns", str(turns)],
            env=env, capture_output=True, text=True, timeout=3600,
        )
        if done.returncode != 0:
            raise SystemExit(f"{name}: the measuring process failed under callgrind:\n{done.stderr[-3000:]}")
        return callgrind_total(out)


def print_instructions(receiver_url: str) -> None:
    """Each condition's instructions per turn (300 measured turns less 100, over 200) against nothing on."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind).")
    runs = [(name, turns) for name in CONDITIONS for turns in (100, 300)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:  # each run is a process of its own
        counted = dict(zip(runs, pool.map(lambda run: count_instructions(run[0], receiver_url, run[1]), runs),
                           strict=True))
    print("| condition | instructions per turn | overhead |")
    print("|---|---:|---:|")
    base = (counted["nothing on", 300] - counted["nothing on", 100]) / 200
    for name in CONDITIONS:
        per_turn = (counted[name, 300] - counted[name, 100]) / 200
        overhead = "–" if name == "nothing on" else f"{(per_turn - base) / base * 100:+.1f} %"
        print(f"| {name} | {per_turn:,.0f} | {overhead} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=800)
    parser.add_argument("--instructions", action="store_true", help="count instructions per turn under callgrind")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps({"cpu_ms_per_turn": asyncio.run(_serve(args.child, args.turns))}))
        return
    from serving_load import DiscardingReceiver

    receiver = DiscardingReceiver()
    if args.instructions:
        try:
            print_instructions(receiver.url)
        finally:
            receiver.close()
        return
    runs: dict[str, list[float]] = {name: [] for name in CONDITIONS}
    try:
        for _ in range(args.rounds):
            for name in CONDITIONS:
                runs[name].append(run_condition(name, args.turns, receiver.url))
    finally:
        receiver.close()
    print(f"{args.turns} turns per run, {args.rounds} rounds, {os.cpu_count()} CPUs, ASGI in one process, PostgreSQL")
    print_table(runs)


if __name__ == "__main__":
    main()
