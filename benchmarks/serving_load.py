"""Serving load: turns per second and p50/p99 latency over HTTP, 1, 2 and 4 uvicorn workers on one PostgreSQL store.

    .venv/bin/python benchmarks/serving_load.py                # prints the table (needs PostgreSQL)
    .venv/bin/python benchmarks/serving_load.py --clients 8 --workers 1 2 4 --memory --round-trips
    .venv/bin/python benchmarks/serving_load.py --quick        # a small smoke run
    .venv/bin/python benchmarks/serving_load.py --overhead --clients 8 --turns 100 --rounds 4   # auth, tracing, metrics
    .venv/bin/python benchmarks/serving_load.py --overhead --instructions --clients 8 --sampled 0  # the same, counted
    AGENCY_SWARM_BENCH_POSTGRES_URL=postgresql://... .venv/bin/python benchmarks/serving_load.py

Method: `agency-swarm serve --factory serving_load:build_agency --store <PostgreSQL> --workers N` in a child
process; its agency is one agent whose scripted model waits 20 ms (asyncio.sleep: a model's latency, not CPU) and
answers. A client in this process keeps `--clients` chats busy at once, each sending its turns one after another
(`POST /chats/{id}/messages`, a new connection per request), after a warm-up turn per chat. Latency is each
request's wall time at the client; turns/s is the measured turns over the wall time of the measured phase; server
CPU is the worker processes' user + system time (/proc) over the measured phase per turn (PostgreSQL's own CPU and
the client's are not in it). "above model" is p50 minus the model's 20 ms. Every turn takes the chat's turn lock
(which says whether another worker changed the chat, and then what it added is read) and stores 2 items, as in
production. The client shares the machine's CPUs with the server and PostgreSQL: on a small machine it is part of
what is measured. `--round-trips` runs each PostgreSQL row once more with the workers connected through a proxy
that counts round trips at the socket (tests/support/pg_proxy.py); its latencies are not used.

`--overhead` serves the same agency (one worker unless `--workers N`, PostgreSQL) several ways, each `--rounds`
times, the ways taking turns: nothing on; JWT authentication (`--jwt-secret-env`, issuer and audience; chat n's
requests carry user-n's HS256 JWT, so every turn also passes the ownership check); OTLP tracing
(`OTEL_EXPORTER_OTLP_ENDPOINT` at a receiver in this process that reads each export and discards it); `--metrics`;
all three; and tracing, alone and with the other two, sampled (`OTEL_TRACES_SAMPLER=parentbased_traceidratio`,
`--sampled` of the traces). It prints each one's median run of server CPU per turn (every run listed) and its
overhead over nothing on, and the median of each round's overhead over that round's run with nothing on. With
tracing on, the exporter's first batch (its connection made) goes out before the measured turns; the workers' CPU is
read as the measured turns end, and their other threads' CPU (the span export thread's; /proc per thread) until
the next batch after them has gone, so the spans' encoding and export are in it and the idle event loop's ticks
while it waits are not. `--instructions` counts the worker's instructions per turn under callgrind instead
(`count_instructions`): a figure a busy host moves far less than CPU time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import queue
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

MODEL_LATENCY_S = float(os.environ.get("BENCH_MODEL_LATENCY_S", "0.020"))
POSTGRES_URL = os.environ.get("AGENCY_SWARM_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
HERE = Path(__file__).resolve().parent
# tests/support/pg_proxy.py, the round-trip counter the tests use too
sys.path.insert(0, str(HERE.parent / "tests" / "support"))
STARTUP_TIMEOUT_S = 180.0


# -- what the workers serve (imported by them as `serving_load`) ---------------------------------------------------


def slow_model(on_call: Callable[[], None] | None = None) -> Any:
    """The scripted model answering every message after 20 ms of latency, blocking or streamed (durable turns
    stream); `on_call` runs before each call."""
    from agency_swarm.testing import ScriptedModel

    class SlowModel(ScriptedModel):
        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            if on_call is not None:
                on_call()
            await asyncio.sleep(MODEL_LATENCY_S)
            return await super().get_response(*args, **kwargs)

        async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            if on_call is not None:
                on_call()
            await asyncio.sleep(MODEL_LATENCY_S)
            async for event in super().stream_response(*args, **kwargs):
                yield event

    return SlowModel(lambda call: f"noted: {call.last_user_message}")


def build_agency(store: Any, model: Any = None) -> Any:
    """One agent answering every message after 20 ms of model latency."""
    import agents

    from agency_swarm import Agency, Agent

    agents.set_tracing_disabled(True)
    return Agency(Agent(name="Assistant", model=model or slow_model()), thread_store=store)


# -- the server -------------------------------------------------------------------------------------------------


def start(
    workers: int, store: str, options: Sequence[str] = (), factory: str = "serving_load:build_agency",
    lines: queue.Queue[str | None] | None = None, env: dict[str, str] | None = None,
    launcher: Sequence[str] = (),
) -> tuple[subprocess.Popen[str], str, list[int]]:
    """`agency-swarm serve` with `options` (and `env` added to this process's), once every worker started: the
    process, its URL and the workers' pids. The server's log lines go on to `lines` (read by the caller) if given.
    `launcher` runs the server's Python in something (valgrind)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, **(env or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    program = [*launcher, sys.executable, "-m", "agency_swarm"] if launcher else [
        str(Path(sys.executable).with_name("agency-swarm"))]
    command = [
        *program, "serve", "--factory", factory, "--store", store,
        "--workers", str(workers), "--port", str(port), "--no-access-log", *options,
    ]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines = queue.Queue() if lines is None else lines

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    started, log, pids = 0, [], []
    while started < workers:  # every worker logs its start-up; bounded by the timeout
        line = lines.get(timeout=STARTUP_TIMEOUT_S * (SLOWDOWN if launcher else 1))
        if line is None:
            raise SystemExit(f"the server exited while starting:\n{''.join(log)}")
        log.append(line)
        found = re.search(r"Started server process \[(\d+)\]", line)
        if found:
            pids.append(int(found.group(1)))
        started += "Application startup complete." in line
    return process, f"http://127.0.0.1:{port}", pids


def _ticks(stat: Path) -> int:
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time the worker processes have used so far (Linux /proc)."""
    return sum(_ticks(Path(f"/proc/{pid}/stat")) for pid in pids) / os.sysconf("SC_CLK_TCK")


def background_cpu_seconds(pids: list[int]) -> float:
    """CPU time the workers' threads other than their main one (the event loop's) have used so far: the span
    export thread's, and any worker thread's (Linux /proc, per thread)."""
    total = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            if task.name == str(pid):
                continue
            try:
                total += _ticks(task / "stat")
            except OSError:  # a thread that ended meanwhile
                continue
    return total / os.sysconf("SC_CLK_TCK")


def stop(process: subprocess.Popen[str], timeout: float = 60) -> None:
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stderr is not None:
        process.stderr.close()


async def delete_chats(prefix: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(POSTGRES_URL)
    try:
        await conn.execute("DELETE FROM agency_swarm_items WHERE starts_with(chat_id, $1)", prefix)
        for table in ("agency_swarm_chats", "agency_swarm_chat_owners"):
            if await conn.fetchval("SELECT to_regclass($1)", table) is not None:
                await conn.execute(f"DELETE FROM {table} WHERE starts_with(chat_id, $1)", prefix)
    finally:
        await conn.close()


# -- the load ---------------------------------------------------------------------------------------------------


async def load(
    url: str, prefix: str, clients: int, turns: int, pids: list[int],
    headers: Callable[[int], dict[str, str]] = lambda number: {}, settle: Callable[[], None] = lambda: None,
    warmed: Callable[[], None] = lambda: None,
) -> dict[str, float]:
    """`clients` chats busy at once, `turns` each after a warm-up turn; `headers(n)` for chat n's requests;
    `warmed()` runs after the warm-up, `settle()` after the measured turns. The workers' CPU is read when the
    measured turns end, plus what their other threads (the span export thread) use until `settle()` returns (the
    turns' spans exported), not the idle event loop's ticks while it waits."""
    import httpx

    limits = httpx.Limits(max_connections=clients + 10, keepalive_expiry=1)  # under uvicorn's 5 s
    latencies: list[float] = []
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:

        async def turn(number: int, message: str) -> float:
            began = time.perf_counter()
            response = await http.post(
                f"/chats/{prefix}{number}/messages", json={"message": message}, headers=headers(number)
            )
            if response.status_code != 200:
                raise SystemExit(f"turn failed: {response.status_code} {response.text}")
            return time.perf_counter() - began

        async def chat(number: int) -> None:
            for index in range(turns):
                latencies.append(await turn(number, f"turn {index}"))

        await asyncio.gather(*(turn(number, "warm-up") for number in range(clients)))
        await asyncio.to_thread(warmed)
        began, cpu_before = time.perf_counter(), cpu_seconds(pids)
        await asyncio.gather(*(chat(number) for number in range(clients)))
        wall = time.perf_counter() - began
        cpu, background_before = cpu_seconds(pids) - cpu_before, background_cpu_seconds(pids)
        await asyncio.to_thread(settle)  # the measured turns' spans exported: that work is theirs, idle time is not
        cpu += background_cpu_seconds(pids) - background_before
    latencies.sort()
    return {
        "turns": len(latencies),
        "turns_per_s": len(latencies) / wall,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))] * 1000,
        "server_cpu_ms": cpu / len(latencies) * 1000,
    }


def measure(workers: int, clients: int, turns: int, store: str) -> dict[str, float]:
    prefix = f"bench-serving-{uuid.uuid4().hex[:8]}-"
    process, url, pids = start(workers, store)
    try:
        return asyncio.run(load(url, prefix, clients, turns, pids))
    finally:
        stop(process)
        if store == POSTGRES_URL:
            asyncio.run(delete_chats(prefix))


def round_trips_per_turn(workers: int, clients: int, turns: int) -> float:
    """The same load with the workers' PostgreSQL connections through a counting proxy in this process."""
    from urllib.parse import urlsplit

    from pg_proxy import CountingProxy

    async def run() -> float:
        parts = urlsplit(POSTGRES_URL)
        proxy = CountingProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
        await proxy.start()
        prefix = f"bench-trips-{uuid.uuid4().hex[:8]}-"
        process, url, pids = await asyncio.to_thread(start, workers, proxy.url(POSTGRES_URL))
        try:
            await load(url, prefix, clients, 1, pids)  # connections opened, statements prepared, chats held
            before = proxy.round_trips
            row = await load(url, prefix, clients, turns, pids)
            return (proxy.round_trips - before - clients) / row["turns"]  # minus the second warm-up turn per chat
        finally:
            await asyncio.to_thread(stop, process)
            await proxy.aclose()
            await delete_chats(prefix)

    return asyncio.run(run())


# -- what authentication, tracing and metrics cost (--overhead) ------------------------------------------------

JWT_SECRET_VARIABLE = "BENCH_JWT_SECRET"
JWT_ISSUER, JWT_AUDIENCE = "https://id.bench.example", "agency-bench"
SETTLE_TIMEOUT_S = 15.0
"""Longest wait, after the measured turns, for the exporter's next batch (it sends one every 5 s at most)."""


class DiscardingReceiver:
    """An OTLP/HTTP endpoint on 127.0.0.1 that reads every export, answers 200 and keeps only their count."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.exported, self.exports = threading.Condition(), 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()
                with receiver.exported:
                    receiver.exports += 1
                    receiver.exported.notify_all()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def next_export(self, timeout: float = SETTLE_TIMEOUT_S) -> None:
        """Until an export arrives after this call (the spans of the turns before it exported; bounded)."""
        with self.exported:
            seen = self.exports
            self.exported.wait_for(lambda: self.exports > seen, timeout=timeout)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def jwt_headers(secret: str) -> Callable[[int], dict[str, str]]:
    """Chat n's requests carry the HS256 JWT of principal `user-n` (the chat is theirs)."""
    import jwt

    expires = int(time.time()) + 3600
    tokens: dict[int, dict[str, str]] = {}

    def headers(number: int) -> dict[str, str]:
        if number not in tokens:
            claims = {"sub": f"user-{number}", "iss": JWT_ISSUER, "aud": JWT_AUDIENCE, "exp": expires}
            tokens[number] = {"authorization": f"Bearer {jwt.encode(claims, secret, algorithm='HS256')}"}
        return tokens[number]

    return headers


def condition(name: str, receiver: DiscardingReceiver, secret: str, ratio: float) -> dict[str, Any]:
    """What `serve` is given for a condition: its options, environment, request headers and settling."""
    auth = name.startswith(("auth", "all three"))
    tracing = name.startswith(("tracing", "all three"))
    metrics = name.startswith(("metrics", "all three"))
    options: list[str] = ["--metrics"] if metrics else []
    env = {JWT_SECRET_VARIABLE: secret}
    if auth:
        options += ["--jwt-secret-env", JWT_SECRET_VARIABLE, "--jwt-issuer", JWT_ISSUER, "--jwt-audience", JWT_AUDIENCE]
    if tracing:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
    if "sampled" in name:
        env["OTEL_TRACES_SAMPLER"], env["OTEL_TRACES_SAMPLER_ARG"] = "parentbased_traceidratio", str(ratio)
    return {
        "options": options, "env": env, "headers": jwt_headers(secret) if auth else (lambda number: {}),
        "settle": receiver.next_export if tracing else (lambda: None),
        # the first export's one-time work (its connection) is not a turn's: done before the measured turns
        "warmed": (lambda: receiver.next_export(WARM_EXPORT_TIMEOUT_S)) if tracing else (lambda: None),
    }


WARM_EXPORT_TIMEOUT_S = 6.0
"""The exporter sends what it holds every 5 s; a sampled warm-up may hold nothing to send."""
OVERHEAD_CONDITIONS = ("nothing on", "auth (JWT)", "tracing (OTLP)", "metrics", "all three")


def conditions(ratio: float) -> tuple[str, ...]:
    percent = f"{ratio * 100:g} %"
    sampled = (f"tracing (OTLP, sampled {percent})", f"all three (tracing sampled {percent})") if ratio else ()
    return OVERHEAD_CONDITIONS + sampled


def measure_overhead(
    workers: int, clients: int, turns: int, rounds: int, ratio: float
) -> dict[str, list[dict[str, float]]]:
    """Each condition `rounds` times, the conditions taking turns (drift on a shared machine hits all alike)."""
    import secrets

    secret = secrets.token_urlsafe(48)
    receiver = DiscardingReceiver()
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in conditions(ratio)}
    try:
        for _ in range(rounds):
            for name in runs:
                given = condition(name, receiver, secret, ratio)
                for variable in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG"):
                    os.environ.pop(variable, None)  # only the tracing conditions trace, as they say
                prefix = f"bench-overhead-{uuid.uuid4().hex[:8]}-"
                process, url, pids = start(workers, POSTGRES_URL, given["options"], env=given["env"])
                try:
                    runs[name].append(asyncio.run(load(
                        url, prefix, clients, turns, pids, given["headers"], given["settle"], given["warmed"]
                    )))
                finally:
                    stop(process)
                    asyncio.run(delete_chats(prefix))
    finally:
        receiver.close()
    return runs


def print_overhead(runs: dict[str, list[dict[str, float]]]) -> None:
    """Per condition the median of its rounds (every run listed), the median's overhead over `nothing on`, and the
    median of the rounds' own overheads (each run against the `nothing on` run of its round: drift cancels)."""
    median = {name: statistics.median(row["server_cpu_ms"] for row in rows) for name, rows in runs.items()}
    base, bases = median["nothing on"], [row["server_cpu_ms"] for row in runs["nothing on"]]
    print("| server | auth | tracing | metrics | turns/s | p50 ms | server CPU ms/turn (median) | runs | overhead "
          "| overhead, paired by round (median) |")
    print("|---|:-:|:-:|:-:|---:|---:|---:|---|---:|---:|")
    for name, rows in runs.items():
        on = ["on" if name.startswith((part, "all three")) else "off" for part in ("auth", "tracing", "metrics")]
        if "sampled" in name:
            on[1] = "sampled"
        rate = statistics.median(row["turns_per_s"] for row in rows)
        p50 = statistics.median(row["p50_ms"] for row in rows)
        every = " ".join(f"{run['server_cpu_ms']:.2f}" for run in rows)
        overhead = paired = "–"
        if name != "nothing on" and base > 0:  # a short run can read no whole clock tick at all
            overhead = f"{(median[name] - base) / base * 100:+.1f} %"
        rounds = [row["server_cpu_ms"] / own - 1 for row, own in zip(rows, bases, strict=True) if own > 0]
        if name != "nothing on" and rounds:
            paired = f"{statistics.median(rounds) * 100:+.1f} %"
        print(f"| {name} | {' | '.join(on)} | {rate:.0f} | {p50:.1f} | {median[name]:.3f} | {every} | {overhead} "
              f"| {paired} |", flush=True)


# -- instructions per turn (--overhead --instructions) ---------------------------------------------------------

SLOWDOWN = 50
"""About how much slower the server runs under callgrind: the model's latency, the span batcher's delay and the
metrics' flush interval are stretched by as much, so a turn finds the event loop as busy as at full speed and the
batches hold what they hold at full speed (a timed flush of a few turns' spans would count what a turn does not pay)."""
STRETCHED_FLUSHES = {
    "OTEL_BSP_SCHEDULE_DELAY": str(5000 * SLOWDOWN), "AGENCY_SWARM_METRICS_FLUSH_SECONDS": str(1.0 * SLOWDOWN),
}
"""The span batcher's delay and the metrics' flush interval, stretched by `SLOWDOWN` (also `observe_cost.py`)."""


def callgrind_total(out: Path) -> int:
    """The instructions (Ir, every thread) in a callgrind output file; SystemExit when none was written."""
    lines = out.read_text().splitlines() if out.exists() else []
    summary = [line for line in lines if line.startswith(("summary:", "totals:"))]
    if not summary:
        raise SystemExit("the process under callgrind did not exit cleanly; no count was written")
    return int(summary[0].split()[1])


_GC_LINE = re.compile(r"^\s*([\d,]+) .*gcmodule\.c:gc_collect_main(?:\s|$)")


def callgrind_gc(out: Path) -> int:
    """The instructions of a callgrind output file spent in CPython's cyclic garbage collector (`gc_collect_main`
    with all it calls: finalizers and weakref callbacks too)."""
    done = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(out)],
                          capture_output=True, text=True, check=True, timeout=900)
    found = [int(match.group(1).replace(",", "")) for line in done.stdout.splitlines()
             if (match := _GC_LINE.match(line))]
    return max(found, default=0)


COUNTED_TURNS = (10, 100)
"""Measured turns per chat in a condition's two runs; their difference over the extra turns is one turn's count."""


def count_instructions(given: dict[str, Any], clients: int, turns: int) -> tuple[int, int]:
    """Instructions (callgrind's Ir, every thread) the one worker executes from the end of its warm-up to its exit,
    having served `turns` measured turns in each of `clients` chats, and those of them in the cyclic collector."""
    with tempfile.TemporaryDirectory(prefix="serving-load-") as scratch:
        out = Path(scratch) / "callgrind.out"
        env = {**given["env"], **STRETCHED_FLUSHES, "BENCH_MODEL_LATENCY_S": str(MODEL_LATENCY_S * SLOWDOWN)}
        launcher = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        prefix = f"bench-instructions-{uuid.uuid4().hex[:8]}-"
        process, url, pids = start(1, POSTGRES_URL, given["options"], env=env, launcher=launcher)

        def zero() -> None:  # startup and warm-up are not counted
            subprocess.run(["callgrind_control", "--zero", str(pids[0])], check=True, capture_output=True, timeout=300)

        try:
            asyncio.run(load(url, prefix, clients, turns, pids, given["headers"], warmed=zero))
        finally:
            stop(process, timeout=900)  # the count is written as the process exits
            asyncio.run(delete_chats(prefix))
        return callgrind_total(out), callgrind_gc(out)


def print_instructions(clients: int, ratio: float) -> None:
    """Each condition's instructions per turn (two runs, `COUNTED_TURNS` measured turns per chat: the difference
    over the extra turns) against nothing on; two servers are counted at once."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("--instructions needs valgrind and callgrind_control (apt-get install valgrind).")
    import secrets

    for variable in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG"):
        os.environ.pop(variable, None)  # only the tracing conditions trace, as they say
    secret, receiver = secrets.token_urlsafe(48), DiscardingReceiver()
    names = conditions(ratio)
    runs = [(name, turns) for name in names for turns in COUNTED_TURNS]
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            counts = pool.map(
                lambda run: count_instructions(condition(run[0], receiver, secret, ratio), clients, run[1]), runs
            )
            counted = dict(zip(runs, counts, strict=True))
    finally:
        receiver.close()
    extra = clients * (COUNTED_TURNS[1] - COUNTED_TURNS[0])
    turn, collector = ({name: (counted[name, COUNTED_TURNS[1]][part] - counted[name, COUNTED_TURNS[0]][part]) / extra
                        for name in names} for part in (0, 1))
    print("| condition | instructions per turn | overhead | in the cyclic GC | without the GC | overhead without |")
    print("|---|---:|---:|---:|---:|---:|")
    base, base_rest = turn["nothing on"], turn["nothing on"] - collector["nothing on"]
    for name in names:
        rest = turn[name] - collector[name]
        overhead = "–" if name == "nothing on" else f"{(turn[name] / base - 1) * 100:+.1f} %"
        overhead_rest = "–" if name == "nothing on" else f"{(rest / base_rest - 1) * 100:+.1f} %"
        print(f"| {name} | {turn[name]:,.0f} | {overhead} | {collector[name]:,.0f} | {rest:,.0f} | {overhead_rest} |",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=64, help="chats kept busy at once")
    parser.add_argument("--turns", type=int, default=30, help="measured turns per chat")
    parser.add_argument("--workers", type=int, nargs="+", help="worker counts (default 1 2 4; --overhead: 1)")
    parser.add_argument("--round-trips", action="store_true", help="count PostgreSQL round trips per turn too")
    parser.add_argument("--quick", action="store_true", help="8 chats x 3 turns: a smoke run")
    parser.add_argument(
        "--memory", action="store_true", help="also 1 worker on the in-memory store: the ceiling without a database"
    )
    parser.add_argument(
        "--overhead", action="store_true",
        help="server CPU per turn with nothing on, JWT auth, OTLP tracing, metrics, and all three (first --workers)",
    )
    parser.add_argument(
        "--instructions", action="store_true",
        help="--overhead: count the worker's instructions per turn under callgrind instead of its CPU time",
    )
    parser.add_argument("--rounds", type=int, default=3, help="--overhead: runs per condition (the median is shown)")
    parser.add_argument(
        "--sampled", type=float, default=0.1, metavar="RATIO",
        help="--overhead: also trace with OTEL_TRACES_SAMPLER=parentbased_traceidratio at RATIO (0: not)",
    )
    args = parser.parse_args()
    clients, turns = (8, 3) if args.quick else (args.clients, args.turns)
    print(f"{clients} concurrent chats x {turns} turns, model latency {MODEL_LATENCY_S * 1000:.0f} ms, "
          f"{os.cpu_count()} CPUs")
    if args.overhead and args.instructions:
        print(f"1 worker on PostgreSQL under callgrind, {COUNTED_TURNS[0]} and {COUNTED_TURNS[1]} measured turns per "
              "chat")
        print_instructions(clients, args.sampled)
        return
    if args.overhead:
        workers = (args.workers or [1])[0]
        print(f"{workers} worker(s) on PostgreSQL, median of {args.rounds} runs per condition")
        print_overhead(measure_overhead(workers, clients, turns, args.rounds, args.sampled))
        return
    print("| workers | store | turns | turns/s | p50 ms | above model ms | p99 ms | server CPU ms/turn "
          "| round trips/turn |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    runs = [(workers, POSTGRES_URL) for workers in args.workers or [1, 2, 4]] + ([(1, "memory")] if args.memory else [])
    for workers, store in runs:
        row = measure(workers, clients, turns, store)
        name = "memory" if store == "memory" else "PostgreSQL"
        trips = "-"
        if args.round_trips and store != "memory":
            trips = f"{round_trips_per_turn(workers, clients, turns):.1f}"
        above = row["p50_ms"] - MODEL_LATENCY_S * 1000
        print(f"| {workers} | {name} | {row['turns']:.0f} | {row['turns_per_s']:.0f} | {row['p50_ms']:.1f} | "
              f"{above:.1f} | {row['p99_ms']:.1f} | {row['server_cpu_ms']:.2f} | {trips} |", flush=True)


if __name__ == "__main__":
    main()
