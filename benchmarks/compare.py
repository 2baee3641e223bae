"""Side-by-side framework-overhead benchmark: physical limit, this project, the openai-agents Runner, upstream 1.x.

    .venv/bin/python benchmarks/compare.py                    # everything (installs upstream on first use)
    .venv/bin/python benchmarks/compare.py --quick            # seconds: this project and the physical limit only
    .venv/bin/python benchmarks/compare.py --only W1,W3S --runs 1 --systems ours,runner

Every system gets the same scripted zero-latency fake model (benchmarks/bench_fake_model.py). Each run starts a fresh
worker process per system (rounds x warm-up + timed turns, then W5) and a fresh child for W6; the table shows the
median of the round means with min-max. Results go to benchmarks/results/ as JSON. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
UPSTREAM_VENV = HERE / ".venv-upstream"
UPSTREAM_REQUIREMENT = "agency-swarm==1.11.0"  # pulls openai-agents 0.18.x; needs Python >= 3.12
SYSTEMS = {
    "physical": "physical limit",
    "ours": "agency_swarm (this project)",
    "runner": "openai-agents Runner",
    "upstream": "agency-swarm 1.x upstream",
}
TURN_ROWS = [  # (workload, label, model calls per turn)
    ("W1", "W1 one text turn", 1),
    ("W2", "W2 one async tool call + reply", 2),
    ("W2sync", "W2 one sync tool call + reply (worker thread)", 2),
    ("W3", "W3 CEO→Developer delegation", 3),
    ("W3S", "W3S the same, streamed, every event consumed", 3),
    ("W4", "W4 chain of 5 agents", 9),
]
WORKLOADS = ["W1", "W2", "W2sync", "W3", "W3S", "W4", "W5", "W6", "IMPORT"]


# -- processes ---------------------------------------------------------------------------------------------------

def _env() -> dict[str, str]:
    env = dict(os.environ, OPENAI_AGENTS_DISABLE_TRACING="1", PYTHONDONTWRITEBYTECODE="1")
    env.setdefault("OPENAI_API_KEY", "offline-benchmark-not-a-key")
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return env


def python_for(system: str) -> str:
    return str(UPSTREAM_VENV / "bin" / "python") if system == "upstream" else sys.executable


def run_child(system: str, role: str, flags: list[str]) -> dict[str, Any]:
    cmd = [python_for(system), str(HERE / "bench_workloads.py"), role, "--system", system, *flags]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=ROOT, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"{SYSTEMS[system]}: {role} failed (exit {proc.returncode}): {' '.join(cmd)}")
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT "):])
    return result


_COMPILED: set[str] = set()


def compile_bytecode(python: str) -> None:
    """Write the .pyc files of that interpreter's packages (and our src/), as an installed package would have them.

    PYTHONDONTWRITEBYTECODE=1 (set for the workers, and often for the whole machine) would otherwise leave every
    import compiling its sources, which measures the compiler, not the import: ~2.5 s instead of ~0.4 s here.
    """
    if python in _COMPILED:
        return
    _COMPILED.add(python)
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = subprocess.run([python, "-c", where], capture_output=True, text=True, check=True).stdout.strip()
    env = {key: value for key, value in _env().items() if key != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([python, "-m", "compileall", "-q", "-j", "0", purelib, str(ROOT / "src")],
                   capture_output=True, env=env, check=False)


def import_seconds(python: str, module: str, repeats: int, after: str = "") -> list[float]:
    """perf_counter around `import module` (once `after` is imported, untimed), each in a fresh interpreter."""
    compile_bytecode(python)
    first = f"import {after}; " if after else ""
    code = f"{first}import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    out = []
    for _ in range(repeats):
        proc = subprocess.run([python, "-c", code], capture_output=True, text=True, env=_env(), check=False)
        if proc.returncode:
            raise SystemExit(f"import {module} failed with {python}:\n{proc.stderr[-2000:]}")
        out.append(float(proc.stdout.strip().splitlines()[-1]))
    return out


def _python312() -> str | None:
    """An interpreter new enough for upstream (python3 first, as asked; then python3.12/3.13, then pyenv's)."""
    candidates = [shutil.which(name) for name in ("python3", "python3.12", "python3.13")]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += sorted(str(p) for p in pyenv.glob("3.1[2-9]*/bin/python3"))
    for candidate in filter(None, candidates):
        check = [candidate, "-c", "import sys; raise SystemExit(sys.version_info < (3, 12))"]
        if subprocess.run(check, capture_output=True, check=False).returncode == 0:
            return candidate
    return None


def ensure_upstream(log: Path) -> str | None:
    """Create benchmarks/.venv-upstream and install upstream into it unless it works already; None on success."""
    python = UPSTREAM_VENV / "bin" / "python"
    probe = [str(python), "-c", "import agency_swarm, agents"]
    if python.exists() and subprocess.run(probe, capture_output=True, env=_env(), check=False).returncode == 0:
        return None
    base = _python312()
    if base is None:
        return "no Python >= 3.12 found"
    print(f"installing {UPSTREAM_REQUIREMENT} into {UPSTREAM_VENV} (log: {log}) ...", file=sys.stderr)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        steps = [[base, "-m", "venv", str(UPSTREAM_VENV)],
                 [str(python), "-m", "pip", "install", "-q", UPSTREAM_REQUIREMENT]]
        for step in steps:
            if subprocess.run(step, stdout=out, stderr=subprocess.STDOUT, check=False).returncode:
                return f"install failed, see {log}"
    if subprocess.run(probe, capture_output=True, env=_env(), check=False).returncode:
        return f"installed but `import agency_swarm` fails, see {log}"
    return None


# -- aggregation -------------------------------------------------------------------------------------------------

def _stats(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def summarize(samples: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for workload, rows in samples.items():
        keys = [key for key, value in rows[0].items() if isinstance(value, int | float)]
        out[workload] = {key: _stats([row[key] for row in rows if row.get(key) is not None])
                         for key in keys if all(row.get(key) is not None for row in rows)}
    return out


def measure(args: argparse.Namespace, systems: list[str]) -> dict[str, Any]:
    worker_flags = ["--only", ",".join(w for w in args.only if w not in ("W6", "IMPORT")), "--rounds", str(args.rounds),
                    "--iters", str(args.iters), "--warmup", str(args.warmup), "--deltas", str(args.deltas),
                    "--w5-turns", str(args.w5_turns)]
    w6_flags = ["--n", str(args.w6_n), "--latency", str(args.w6_latency)]
    samples: dict[str, dict[str, list[dict[str, Any]]]] = {s: {} for s in systems}
    started = time.perf_counter()
    for run in range(args.runs):  # systems interleaved per run, so a slow spell of the machine hits all of them
        for system in systems:
            if any(w not in ("W6", "IMPORT") for w in args.only):
                for workload, rows in run_child(system, "worker", worker_flags).items():
                    samples[system].setdefault(workload, []).extend(rows)
            if "W6" in args.only:
                samples[system].setdefault("W6", []).append(run_child(system, "w6", w6_flags))
        print(f"run {run + 1}/{args.runs} done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    result = {system: summarize(samples[system]) for system in systems}
    if "IMPORT" in args.only:
        measure_imports(args, systems, result)
    return {"summary": result, "samples": samples}


def measure_imports(args: argparse.Namespace, systems: list[str], result: dict[str, Any]) -> None:
    agents_here = _stats(import_seconds(sys.executable, "agents", args.import_repeats))
    for system in systems:
        python = python_for(system)
        module = "agency_swarm" if system in ("ours", "upstream") else "agents"
        here = python == sys.executable
        base = agents_here if here else _stats(import_seconds(python, "agents", args.import_repeats))
        own = base if module == "agents" else _stats(import_seconds(python, module, args.import_repeats))
        # measured, not subtracted: two ~2.5 s medians differ by more than the ~20 ms being asked about
        extra = None if module == "agents" else _stats(import_seconds(python, module, args.import_repeats, "agents"))
        result[system]["IMPORT"] = {"seconds": own, "agents_seconds": base, "module": module, "over_agents": extra}


# -- tables ------------------------------------------------------------------------------------------------------

def _num(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


def _cell(stats: dict[str, float] | None, scale: float = 1.0, digits: int = 0, spread: bool = True) -> str:
    if not stats:
        return "—"
    text = _num(stats["median"] * scale, digits)
    if spread and stats["n"] > 1:
        text += f" ({_num(stats['min'] * scale, digits)}–{_num(stats['max'] * scale, digits)})"
    return text


def _row(label: str, cells: list[str]) -> str:
    return f"| {label} | " + " | ".join(cells) + " |"


def _get(summary: dict[str, Any], system: str, workload: str, key: str) -> dict[str, float] | None:
    found: dict[str, float] | None = summary.get(system, {}).get(workload, {}).get(key)
    return found


def main_table(summary: dict[str, Any], columns: list[str], missing: dict[str, str], args: argparse.Namespace) -> str:
    def cells(workload: str, key: str, scale: float = 1.0, digits: int = 0, spread: bool = True) -> list[str]:
        return [missing.get(s) or _cell(_get(summary, s, workload, key), scale, digits, spread) for s in columns]

    lines = [_row("workload", [SYSTEMS[s] for s in columns]), "|---|" + "---:|" * len(columns)]
    for workload, label, calls in TURN_ROWS:
        if workload in args.only:
            lines.append(_row(f"{label} ({calls} model call{'s' * (calls > 1)}) — µs/turn", cells(workload, "mean_us")))
            if workload == "W3S":
                lines.append(_row("W3S events per turn", cells("W3S", "events", spread=False)))
    if "W5" in args.only:
        turns = args.w5_turns
        window, last = max(1, min(50, turns // 6)), f"{turns - max(1, min(50, turns // 6)) + 1}–{turns}"
        lines += [
            _row(f"W5 {turns} turns on one chat, file store — total s", cells("W5", "total_s", digits=3)),
            _row(f"W5 mean turn, turns 1–{window} — ms", cells("W5", "first_ms", digits=3, spread=False)),
            _row(f"W5 mean turn, turns {last} — ms", cells("W5", "last_ms", digits=3, spread=False)),
            _row("W5 growth, last ÷ first", cells("W5", "growth", digits=2, spread=False)),
            _row("W5 bytes written ÷ final size", cells("W5", "written_per_final", digits=2, spread=False)),
        ]
    if "W6" in args.only:
        lines += [
            _row(f"W6 {args.w6_n} concurrent W3 chats, model latency {args.w6_latency * 1e3:g} ms — wall s",
                 cells("W6", "wall_s", digits=3)),
            _row("W6 CPU s", cells("W6", "cpu_s", digits=3, spread=False)),
            _row("W6 peak RSS growth (ru_maxrss) — MB", cells("W6", "rss_growth_mb", digits=1, spread=False)),
        ]
    if "IMPORT" in args.only:
        lines.append(_row("import time, fresh interpreter — ms (agency_swarm; physical/Runner: agents)",
                          cells("IMPORT", "seconds", scale=1e3)))
        over = [missing.get(s) or ("0" if s in ("physical", "runner") else _cell(
            summary.get(s, {}).get("IMPORT", {}).get("over_agents"), 1e3, 1)) for s in columns]
        lines.append(_row("import time after `import agents` (same interpreter) — ms", over))
    return "\n".join(lines)


def overhead_table(summary: dict[str, Any], columns: list[str], missing: dict[str, str], only: list[str]) -> str:
    systems = [s for s in columns if s != "physical"]
    lines = [_row("workload", [SYSTEMS[s] for s in systems]), "|---|" + "---:|" * len(systems)]
    for workload, _, calls in TURN_ROWS:
        if workload not in only:
            continue
        floor = _get(summary, "physical", workload, "mean_us")
        cells = []
        for s in systems:
            value = _get(summary, s, workload, "mean_us")
            cells.append(missing.get(s) or ("—" if not value or not floor else
                                            _num((value["median"] - floor["median"]) / calls)))
        lines.append(_row(f"{workload} ({calls} call{'s' * (calls > 1)})", cells))
    return "\n".join(lines)


# -- command line ------------------------------------------------------------------------------------------------

def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh worker processes per system (default 3)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per worker (default 3)")
    parser.add_argument("--iters", type=int, default=500, help="timed turns per round (default 500)")
    parser.add_argument("--warmup", type=int, default=50, help="untimed turns before each round (default 50)")
    parser.add_argument("--deltas", type=int, default=10, help="text deltas per streamed message (default 10)")
    parser.add_argument("--w5-turns", type=int, default=300)
    parser.add_argument("--w6-n", type=int, default=500)
    parser.add_argument("--w6-latency", type=float, default=0.020)
    parser.add_argument("--import-repeats", type=int, default=5)
    parser.add_argument("--only", default=",".join(WORKLOADS), help="comma list of " + ",".join(WORKLOADS))
    parser.add_argument("--systems", default="physical,ours,runner,upstream")
    parser.add_argument("--quick", action="store_true",
                        help="seconds, not minutes: tiny counts, this project and physical only, no upstream install")
    parser.add_argument("--out-dir", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.rounds, args.iters, args.warmup = 1, 1, 30, 5
        args.w5_turns, args.w6_n, args.import_repeats, args.systems = 30, 50, 1, "physical,ours"
    names = {w.lower(): w for w in WORKLOADS}
    args.only = [names[w.strip().lower()] for w in args.only.split(",") if w.strip()]
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if unknown := set(args.systems) - set(SYSTEMS):
        parser.error(f"unknown systems {sorted(unknown)}; choose from {list(SYSTEMS)}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    columns = [s for s in SYSTEMS if s in args.systems]
    missing: dict[str, str] = {}
    if "upstream" in columns:
        problem = ensure_upstream(args.out_dir / "upstream-install.log")
        if problem:
            print(f"upstream: {problem}; its column says 'not installed'", file=sys.stderr)
            missing["upstream"] = "not installed"
    measured = measure(args, [s for s in columns if s not in missing])
    summary = measured["summary"]
    settings = {k: v for k, v in vars(args).items() if k != "out_dir"}
    doc = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "python": platform.python_version(),
           "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}",
           "settings": settings, "missing": missing, **measured}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    out = args.out_dir / f"compare-{time.strftime('%Y%m%d-%H%M%S')}{'-quick' if args.quick else ''}.json"
    out.write_text(json.dumps(doc, indent=1, default=str))
    print(main_table(summary, columns, missing, args))
    print()
    print("Framework overhead per model call (µs) = (system − physical) ÷ model calls")
    print()
    print(overhead_table(summary, columns, missing, args.only))
    print(f"\nJSON: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
