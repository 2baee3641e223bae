"""Metric values added up in memory and written together (`_telemetry._pending`): the same exposition as writing each
value at once, a flush on the loop after the interval, before /metrics renders, from other threads, and the
interval's variable."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from agency_swarm._telemetry import _switch
from agency_swarm._telemetry._metrics import _SECONDS, metrics
from agency_swarm._telemetry._pending import DEFAULT_FLUSH_SECONDS, FLUSH_VARIABLE, Buffers, Pending, flush_interval
from agency_swarm.serving import create_app
from observability_support import build_priced_agency
from test_observability import metric_values

BOUND_S = 10.0
"""How long a flush may take to show before a test fails saying it did not."""
AMOUNTS = [0.0, 0.004, 0.005, 0.0051, 0.1, 0.25, 2.5, 7.0, 60.0, 300.0, 300.5, 1e9, -1.0, 0.75]
"""Below the first bound, exactly on bounds, between them, past the last finite one (+Inf), and negative."""


@pytest.fixture(autouse=True)
def telemetry_off() -> Iterator[None]:
    yield
    _switch.switch_off()


def series(registry: CollectorRegistry) -> tuple[Any, Any, Any]:
    counter = Counter("t_events", "Events.", ["kind"], registry=registry)
    gauge = Gauge("t_active", "Active.", registry=registry)
    histogram = Histogram("t_seconds", "Latency.", ["agent"], buckets=_SECONDS, registry=registry)
    return counter, gauge, histogram


def exposition(registry: CollectorRegistry) -> list[str]:
    """The registry's lines but the `_created` ones (the time each series was made, which differs)."""
    return [line for line in generate_latest(registry).decode().splitlines() if "_created" not in line]


def test_buffered_values_written_equal_the_same_values_written_one_by_one() -> None:
    buffered, direct = CollectorRegistry(), CollectorRegistry()
    (counter, gauge, histogram), (counter_d, gauge_d, histogram_d) = series(buffered), series(direct)
    pending = Pending()
    for index, amount in enumerate(AMOUNTS):
        agent = "A" if index % 3 else "B"
        pending.observe(histogram.labels(agent), amount)
        histogram_d.labels(agent).observe(amount)
        pending.add(counter.labels(agent), index)
        counter_d.labels(agent).inc(index)
        pending.add(gauge, 1 if index % 3 else -1)
        gauge_d.inc(1 if index % 3 else -1)
    assert exposition(buffered) != exposition(direct)  # nothing written yet
    pending.write()
    assert exposition(buffered) == exposition(direct)
    lines = exposition(buffered)
    assert 't_seconds_bucket{agent="A",le="+Inf"} 9.0' in lines
    assert 't_seconds_bucket{agent="A",le="0.005"} 2.0' in lines  # 0.004 and 0.005 itself
    assert 't_seconds_bucket{agent="B",le="120.0"} 4.0' in lines
    assert 't_seconds_bucket{agent="B",le="300.0"} 5.0' in lines  # and 300.0 itself
    assert any(line.startswith('t_seconds_sum{agent="A"}') for line in lines)
    assert "t_active 4.0" in lines
    assert (pending.adds, pending.observed) == ({}, {})


def test_values_written_in_several_flushes_add_up() -> None:
    buffered, direct = CollectorRegistry(), CollectorRegistry()
    (_, gauge, histogram), (_, gauge_d, histogram_d) = series(buffered), series(direct)
    pending = Pending()
    for amount in (0.5, 0.25, 3.0, 1000.0):  # sums exact in binary: the order they are added in does not matter
        pending.observe(histogram.labels("A"), amount)
        histogram_d.labels("A").observe(amount)
        pending.add(gauge, 1)
        gauge_d.inc()
        pending.write()
    assert exposition(buffered) == exposition(direct)


MULTIPROCESS_CHECK = """
import os, sys
from prometheus_client import CollectorRegistry, Histogram, multiprocess
from agency_swarm._telemetry._pending import Pending

buffered = Histogram("a_seconds", "Latency.", ["agent"], buckets=(0.1, 1.0, 10.0))
direct = Histogram("b_seconds", "Latency.", ["agent"], buckets=(0.1, 1.0, 10.0))
pending = Pending()
for amount in (0.05, 0.1, 0.5, 1.0, 9.0, 11.0, 500.0):
    pending.observe(buffered.labels("A"), amount)
    direct.labels("A").observe(amount)
pending.write()
registry = CollectorRegistry()
multiprocess.MultiProcessCollector(registry)
samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in registry.collect() for s in f.samples}
a = {(name[1:], labels): value for (name, labels), value in samples.items() if name.startswith("a_")}
b = {(name[1:], labels): value for (name, labels), value in samples.items() if name.startswith("b_")}
assert a == b and len(a) == 6, (a, b)
print("same")
"""


def test_buffered_observations_write_the_same_in_multiprocess_mode(tmp_path: Any) -> None:
    """As `serve --metrics` runs: each value in the process's file, read back summed by the collector."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(MULTIPROCESS_CHECK)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert (done.returncode, done.stdout.strip()) == (0, "same"), done.stderr


def test_with_no_loop_running_values_are_written_at_once() -> None:
    registry = CollectorRegistry()
    counter, _, _ = series(registry)
    buffers = Buffers(3600)
    pending = buffers.pending()
    pending.add(counter.labels("x"), 2)
    buffers.written(pending)
    assert registry.get_sample_value("t_events_total", {"kind": "x"}) == 2
    assert pending.loop is None


async def test_on_a_loop_values_are_written_one_interval_after_the_first(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = CollectorRegistry()
    counter, gauge, _ = series(registry)
    buffers = Buffers(0.05)
    flushed = asyncio.Event()
    write = Pending.write

    def noted(pending: Pending) -> None:
        write(pending)
        flushed.set()

    monkeypatch.setattr(Pending, "write", noted)
    pending = buffers.pending()
    for _ in range(3):
        pending.add(counter.labels("x"), 1)
        pending.add(gauge, 1)
        buffers.written(pending)
    assert registry.get_sample_value("t_events_total", {"kind": "x"}) == 0  # the series exists, its values wait
    assert pending.loop is asyncio.get_running_loop()
    await asyncio.wait_for(flushed.wait(), BOUND_S)
    assert registry.get_sample_value("t_events_total", {"kind": "x"}) == 3
    assert registry.get_sample_value("t_active") == 3
    assert (pending.loop, pending.timer, pending.adds) == (None, None, {})


async def test_a_flush_left_on_a_closed_loop_is_scheduled_again_on_the_running_one() -> None:
    registry = CollectorRegistry()
    counter, _, _ = series(registry)
    buffers = Buffers(3600)
    pending = buffers.pending()
    old = asyncio.new_event_loop()
    pending.add(counter.labels("x"), 1)
    pending.loop, pending.timer = old, old.call_later(3600, pending.write)
    old.close()
    pending.add(counter.labels("x"), 1)
    buffers.written(pending)
    assert pending.loop is asyncio.get_running_loop()
    buffers.flush()
    assert registry.get_sample_value("t_events_total", {"kind": "x"}) == 2


async def test_a_scrape_writes_other_threads_values_first() -> None:
    """A thread whose loop runs (as DBOS runs durable turns) writes its values when asked; a thread gone is written
    by the scrape itself."""
    registry = CollectorRegistry()
    counter, _, _ = series(registry)
    buffers = Buffers(3600)

    async def add(kind: str) -> None:
        pending = buffers.pending()
        pending.add(counter.labels(kind), 1)
        buffers.written(pending)

    gone = threading.Thread(target=asyncio.run, args=(add("gone"),))
    gone.start()
    gone.join(BOUND_S)
    loop = asyncio.new_event_loop()
    running = threading.Thread(target=loop.run_forever)
    running.start()
    try:
        asyncio.run_coroutine_threadsafe(add("running"), loop).result(BOUND_S)
        await add("here")
        assert [registry.get_sample_value("t_events_total", {"kind": kind}) for kind in ("gone", "running", "here")] \
            == [0, 0, 0]
        await buffers.flush_everywhere(BOUND_S)
        assert [registry.get_sample_value("t_events_total", {"kind": kind}) for kind in ("gone", "running", "here")] \
            == [1, 1, 1]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        running.join(BOUND_S)
        loop.close()


def test_a_forked_child_forgets_its_parents_pending_values() -> None:
    registry = CollectorRegistry()
    counter, _, _ = series(registry)
    buffers = Buffers(3600)
    parents = buffers.pending()
    parents.add(counter.labels("x"), 5)
    buffers.forget()  # what the at-fork hook runs in the child
    assert parents.adds == {}
    assert buffers.pending() is not parents
    assert buffers.pending().adds == {}
    buffers.flush_all_now()
    assert registry.get_sample_value("t_events_total", {"kind": "x"}) == 0


@pytest.mark.parametrize(("raw", "seconds"), [(None, DEFAULT_FLUSH_SECONDS), ("", DEFAULT_FLUSH_SECONDS),
                                               ("0.25", 0.25), (" 5 ", 5.0)])
def test_the_interval_is_read_from_its_variable(raw: str | None, seconds: float) -> None:
    assert flush_interval({} if raw is None else {FLUSH_VARIABLE: raw}) == seconds


@pytest.mark.parametrize("raw", ["0", "-1", "soon", "nan", "inf"])
def test_a_bad_interval_is_warned_about_and_the_default_used(raw: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agency_swarm._telemetry._pending"):
        assert flush_interval({FLUSH_VARIABLE: raw}) == DEFAULT_FLUSH_SECONDS
    assert [record.getMessage() for record in caplog.records] == [
        f"{FLUSH_VARIABLE} must be a positive number of seconds; using {DEFAULT_FLUSH_SECONDS}."
    ]  # the value itself is not echoed


async def test_a_turns_values_wait_in_memory_until_flushed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the process's `Metrics`: the active-turns gauge, the turn's counter and histogram, a model call's."""
    from prometheus_client import REGISTRY

    counted = metrics()
    counted.flush()
    monkeypatch.setattr(counted.buffers, "interval", 3600)
    names = [("agency_swarm_active_turns", {}), ("agency_swarm_turns_total", {"outcome": "completed"}),
             ("agency_swarm_turn_duration_seconds_bucket", {"agent": "Z", "le": "0.5"}),
             ("agency_swarm_turn_duration_seconds_sum", {"agent": "Z"}),
             ("agency_swarm_model_call_duration_seconds_count", {"agent": "Z", "model": "gpt-4o"}),
             ("agency_swarm_model_call_errors_total", {"agent": "Z", "model": "gpt-4o"})]

    def values() -> list[float]:
        return [REGISTRY.get_sample_value(name, labels) or 0.0 for name, labels in names]

    before = values()
    counted.turn_started()
    counted.model_called("Z", "gpt-4o", 0.2, None, RuntimeError("down"))
    assert values()[0] == before[0]  # the gauge too waits
    counted.turn_ended("Z", "completed", 0.5)
    assert values() == before
    counted.flush()
    assert [now - then for now, then in zip(values(), before, strict=True)] == [0, 1, 1, 0.5, 1, 1]


async def test_the_metrics_route_writes_this_process_values_before_it_renders(monkeypatch: pytest.MonkeyPatch) -> None:
    app = create_app(build_priced_agency, store="memory", metrics=True)
    monkeypatch.setattr(metrics().buffers, "interval", 3600)  # no scheduled flush comes before the scrape
    key = ("agency_swarm_turns_total", (("outcome", "completed"),))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app") as client:
        before = metric_values((await client.get("/metrics")).text).get(key, 0.0)
        for index in range(3):
            assert (await client.post(f"/chats/route{index}/messages", json={"message": "go"})).status_code == 200
        assert metrics().buffers.pending().adds  # waiting in memory
        values = metric_values((await client.get("/metrics")).text)
    assert values[key] == before + 3
    assert values[("agency_swarm_active_turns", ())] == 0


def test_a_value_prometheus_client_refuses_is_logged_and_the_others_are_written(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = CollectorRegistry()
    counter, gauge, histogram = series(registry)
    pending = Pending()
    pending.add(counter.labels("down"), -2)  # a counter cannot go down
    pending.add(gauge, 3)
    pending.observe(histogram.labels("A"), 0.5)
    with caplog.at_level(logging.WARNING, logger="agency_swarm._telemetry._pending"):
        pending.write()
    lines = exposition(registry)
    assert "t_active 3.0" in lines
    assert 't_seconds_count{agent="A"} 1.0' in lines
    assert 't_events_total{kind="down"} 0.0' in lines
    assert [record.getMessage().split(":")[0] for record in caplog.records] == ["A metric value was left out"]
    assert (pending.adds, pending.observed) == ({}, {})


@pytest.mark.parametrize("reported", [-5, 0])
async def test_token_counts_below_one_are_not_counted_and_the_rest_of_the_call_is(
    reported: int, caplog: pytest.LogCaptureFixture
) -> None:
    """A model (a custom one, say) reporting input tokens below zero: its output tokens, latency and cost still
    count, nothing refuses them at the flush, and no counter goes down."""
    from agents.usage import Usage
    from prometheus_client import REGISTRY

    counted = metrics()
    counted.flush()
    labels = {"agent": "Neg", "model": "gpt-4o"}

    def value(name: str, **extra: str) -> float:
        return REGISTRY.get_sample_value(name, {**labels, **extra}) or 0.0

    before = [value("agency_swarm_tokens_total", kind="input"), value("agency_swarm_tokens_total", kind="output"),
              value("agency_swarm_model_call_duration_seconds_count"), value("agency_swarm_cost_usd_total")]
    usage = Usage(requests=1, input_tokens=reported, output_tokens=1000, total_tokens=1000 + reported)
    with caplog.at_level(logging.WARNING):
        counted.model_called("Neg", "gpt-4o", 0.2, usage, None)
        counted.flush()
    after = [value("agency_swarm_tokens_total", kind="input"), value("agency_swarm_tokens_total", kind="output"),
             value("agency_swarm_model_call_duration_seconds_count"), value("agency_swarm_cost_usd_total")]
    assert after[:3] == [before[0], before[1] + 1000, before[2] + 1]
    assert after[3] >= before[3]
    assert caplog.records == []
