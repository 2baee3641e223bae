"""benchmarks/compare.py --quick runs end to end and prints a number for every workload, for both systems."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NUMBER = re.compile(r"^-?[\d,]+(\.\d+)?( \([\d,.]+–[\d,.]+\))?$")
ROWS = ("W1 ", "W2 one async", "W2 one sync", "W3 ", "W3S the same", "W3S events", "W4 ", "W5 ", "W6 ", "import time")


def test_compare_quick_prints_every_workload(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "compare.py"), "--quick", "--out-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "| workload | physical limit | agency_swarm (this project) |"
    rows = {}
    for line in lines:
        if line.startswith("| "):
            label, *cells = line.strip("| ").split(" | ")
            rows.setdefault(label, cells)
    for prefix in ROWS:
        matching = [cells for label, cells in rows.items() if label.startswith(prefix)]
        assert matching, f"no row for {prefix!r} in:\n{proc.stdout}"
        physical, ours = (cell.strip() for cell in matching[0])
        assert NUMBER.match(ours), (prefix, ours)
        assert NUMBER.match(physical), (prefix, physical)
    assert "Framework overhead per model call" in proc.stdout
    assert list(tmp_path.glob("compare-*-quick.json"))


def test_the_interleaved_harness_prints_a_ratio_for_each_workload_it_is_given() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "interleaved.py"), "--only", "W1,W3S,W4S,W2sync+hop", "--rounds",
         "1", "--iters", "3", "--warmup", "1"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| W")]
    assert [row.split(" | ")[0] for row in rows] == ["| W1", "| W3S", "| W4S", "| W2sync+hop"]
    for row in rows:
        cells = row.strip("| ").split(" | ")[1:]
        assert all(re.fullmatch(r"\d+\.\d+ \(\d+\.\d+\)", cell) for cell in cells), row


def test_the_interleaved_harness_names_the_workloads_it_knows() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "interleaved.py"), "--only", "W9", "--rounds", "1", "--iters", "1"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert proc.returncode != 0
    assert "unknown workload 'W9'; choose from W1, W2, W2sync, W3, W3S, W4, W4S, W2sync+hop" in proc.stderr


def test_the_model_in_context_harness_times_the_model_call_in_every_condition() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "model_in_context.py"), "--rounds", "1", "--iters", "5",
         "--warmup", "1"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.strip("| ").split(" | ") for line in proc.stdout.splitlines()[2:]]
    assert [name for name, _ in rows][:2] == ["alone (the physical limit's loop)", "inside agency_swarm's W1 turn"]
    assert [re.fullmatch(r"after ~\d+ µs of unrelated Python", name) is not None for name, _ in rows[2:]] == [True] * 2
    assert all(re.fullmatch(r"\d+\.\d+ \(\d+\.\d+\)", cell) for _, cell in rows), proc.stdout


def test_the_long_chat_benchmark_prints_a_row_per_shape_and_store() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "long_chat.py"), "--lengths", "10", "200", "--stores", "memory",
         "sqlite", "--chats", "1", "--rounds", "1", "--sweeps", "1"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    rows = [line.strip("| ").split(" | ") for line in lines]
    shapes = ["W1", "W2", "W3", "W3S", "W4", "approval, turn ids", "W1, changed elsewhere", "W1, turn ids",
              "W3, changed elsewhere"]
    assert [row[0] for row in rows] == [
        "store", *[f"memory, {shape}" for shape in shapes], *[f"sqlite, {shape}" for shape in shapes],
        "a copy of the model's input per call (not made)",
    ]
    for row in rows[1:-1]:
        assert all(re.fullmatch(r"\d+\.\d+ \(\d+\.\d+x\)", cell) for cell in row[1:]), row
    assert all(re.fullmatch(r"\d+\.\d+", cell) for cell in rows[-1][1:]), rows[-1]


def test_the_durable_load_benchmark_prints_plain_and_durable_rows_and_a_recovery_time() -> None:
    from postgres_support import require_postgres

    url = require_postgres()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "durable_load.py"), "--clients", "2", "--workers", "1",
         "--seconds", "0.3", "--idle", "0.1", "--kills", "1", "--recovery-workers", "2", "--recovery-clients", "2",
         "--settle", "0.2"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
        env={**os.environ, "AGENCY_SWARM_BENCH_POSTGRES_URL": url},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.strip("| ").split(" | ") for line in proc.stdout.splitlines() if line.startswith(("| plain", "| dur"))]
    assert [row[:3] for row in rows] == [["plain", "1", "2"], ["durable", "1", "2"]]
    for row in rows:
        assert all(re.fullmatch(r"\d+(\.\d+)?", cell) for cell in row[3:10]), row
    split = next(line for line in proc.stdout.splitlines() if line.startswith("| 1 | 2 |"))
    assert all(re.fullmatch(r"-?\d+\.\d", cell) for cell in split.strip("| ").split(" | ")[2:]), split
    assert re.search(r"Recovery time \(kill → every turn it was running ended\): median \d+\.\d\d s", proc.stdout)


def test_the_attachments_benchmark_prints_its_three_tables() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "attachments.py"), "--stores", "memory", "file", "sqlite",
         "--image-mb", "0.01", "--turns", "1", "2", "--images", "2", "--image-kb", "1", "--rounds", "2"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.strip("| ").split(" | ") for line in proc.stdout.splitlines() if line.startswith("| ")]
    stored = [row for row in rows if row[0] in ("memory", "file", "sqlite") and len(row) == 4 and "x)" in row[1]]
    assert [row[0] for row in stored] == ["memory", "file", "sqlite"]
    for row in stored:  # the image counts once: a few hundred bytes of items more per turn, never a copy
        held = [float(cell.split("(")[1].rstrip("x)")) for cell in row[1:]]
        assert all(1.0 <= ratio < 2.0 for ratio in held), row
    costs = [row for row in rows if len(row) == 4 and row[3].endswith("x") and "(" not in row[1]]
    assert [row[0] for row in costs] == ["memory", "file", "sqlite"]
    calls = [row for row in rows if row[0].isdigit()]
    assert [row[0] for row in calls] == ["1", "2", "3", "4"]  # 2 images, 2 text turns: every call shown
    assert all(re.fullmatch(r"\d+\.\d{3}", row[3]) for row in calls), calls


def test_the_serving_overhead_benchmark_prints_each_condition_and_its_cost() -> None:
    """serving_load.py --overhead: server CPU per turn with nothing on, JWT auth, OTLP tracing (to a receiver in the
    benchmark), metrics and all three; every turn of the auth conditions carries a JWT the server accepts."""
    from postgres_support import require_postgres

    url = require_postgres()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "serving_load.py"), "--overhead", "--clients", "2", "--turns", "2",
         "--rounds", "1"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
        env={**os.environ, "AGENCY_SWARM_BENCH_POSTGRES_URL": url, "OTEL_BSP_SCHEDULE_DELAY": "100"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.strip("| ").split(" | ") for line in proc.stdout.splitlines() if line.startswith("| ")][1:]
    assert [row[0] for row in rows] == [
        "nothing on", "auth (JWT)", "tracing (OTLP)", "metrics", "all three", "tracing (OTLP, sampled 10 %)",
        "all three (tracing sampled 10 %)",
    ]
    assert [row[1:4] for row in rows] == [
        ["off", "off", "off"], ["on", "off", "off"], ["off", "on", "off"], ["off", "off", "on"], ["on", "on", "on"],
        ["off", "sampled", "off"], ["on", "sampled", "on"],
    ]
    for row in rows:
        assert re.fullmatch(r"\d+\.\d{3}", row[6]), row
    assert rows[0][8] == rows[0][9] == "–"
    percent = r"[+-]\d+\.\d %" if float(rows[0][6]) > 0 else "–"  # a base run can read no whole clock tick
    assert all(re.fullmatch(percent, row[8]) and re.fullmatch(percent, row[9]) for row in rows[1:]), rows


def test_the_span_cost_benchmark_prints_both_pipelines() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "span_cost.py"), "--rounds", "1", "--turns", "10"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.strip("| ").split(" | ") for line in proc.stdout.splitlines() if line.startswith("| ")][1:]
    assert [row[0] for row in rows] == ["light (agency_swarm)", "OpenTelemetry SDK"]
    cell = r"-?[\d,]+\.\d \(-?[\d,]+\.\d–-?[\d,]+\.\d\)"
    assert all(re.fullmatch(cell, value) for row in rows for value in row[1:]), proc.stdout


def test_the_in_process_observability_benchmark_prints_every_condition() -> None:
    """observe_cost.py: each condition in its own process, served as ASGI on PostgreSQL, a CPU figure per row."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "observe_cost.py"), "--rounds", "1", "--turns", "5"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
        env={**os.environ, "AGENCY_SWARM_BENCH_POSTGRES_URL": os.environ.get(
            "AGENCY_SWARM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {line.split(" | ")[0].strip("| "): line for line in proc.stdout.splitlines() if line.startswith("| ")}
    for name in ("nothing on", "auth (JWT)", "tracing (OTLP)", "metrics", "all three"):
        assert name in rows, proc.stdout
        assert re.search(r"\| \d+\.\d{3} \|", rows[name]), rows[name]
