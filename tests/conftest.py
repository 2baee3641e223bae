"""Shared test set-up: tracing off (tests never export anything), the `slow` mark on the suites that start
processes, servers, browsers or PostgreSQL sessions by the dozen, or generate thousands of cases
(`pytest -m "not slow"` runs the rest in under a minute; CI runs all), and what running on several pytest-xdist
workers (`-n 2`) needs: a PostgreSQL database per worker, the modules that share state kept on one worker, and the
suites' summaries gathered from the workers."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import agents
import pytest

if TYPE_CHECKING:
    from openai_server import OpenAIServer

TESTS = Path(__file__).resolve().parent
# tests/support and every folder of test modules are importable by module name, whichever pytest collects first: a
# suite imports helpers (`from serving_support import Server`) and another suite's names (`from test_cancel import
# Gates`) by name, so module names are unique across tests/; `serve` imports its apps from tests/support as well.
MODULE_FOLDERS = [TESTS / "support", *sorted({path.parent for path in TESTS.glob("*/test_*.py")
                                              if not (path.parent / "__init__.py").exists()})]
sys.path[:0] = [str(folder) for folder in MODULE_FOLDERS if str(folder) not in sys.path]

import xdist_support  # noqa: E402  (in tests/support, on the path from here on)

agents.set_tracing_disabled(True)
xdist_support.use_worker_database()  # before any test module reads the database's URL

SLOW_FOLDERS = frozenset({"edges", "faults", "parity"})
SLOW_PREFIXES = (
    "test_durable", "test_serving_", "test_reference_systems_", "test_a2a_", "test_ag_ui_durable", "test_ag_ui_js",
    "test_ag_ui_generated",
)
SLOW_MODULES = frozenset({
    "test_web_chat", "test_visualize", "test_docs_site", "test_readme", "test_packaging", "test_scripts",
    "test_benchmarks_smoke", "test_crash", "test_partition", "test_pg_schema_race", "test_shared_store_processes",
    "test_observability_workers", "test_serve_command", "test_cli_exit", "test_examples", "test_file_store_lock",
    "test_sqlite_turn_locks", "test_listener", "test_extras", "test_round_trips", "test_attachment_http",
    "test_attachment_stores", "test_real_models", "test_sdk_boundary", "test_python_versions", "test_chat_index",
    "test_observability", "test_cli_attach", "test_sync_and_real_client", "test_file_store_cancel",
    "test_cancel_durable", "test_cancel_workers", "test_cancel_generated", "test_agencies", "test_turn_work",
})
SLOW_TESTS = frozenset({  # in otherwise quick modules: each starts a process of its own
    "test_serve_uses_the_agency_files_store_so_chats_survive_a_restart", "test_the_installed_command_runs_one_turn",
    "test_ctrl_c_cancels_the_turn_keeps_it_saved_and_a_second_ctrl_c_exits",
    "test_stores_and_cost_types_load_on_first_use", "test_a_worker_builds_its_app_from_the_environment",
    "test_spans_still_queued_are_exported_at_interpreter_exit",
    "test_a_forked_child_exports_its_own_spans_on_a_connection_of_its_own",
    "test_an_application_tracer_provider_gets_sdk_spans_and_nothing_goes_to_the_variables_endpoint",
    "test_an_agency_file_is_built_on_the_workers_store", "test_no_test_asserts_on_elapsed_time",
})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    slow = pytest.mark.slow
    for item in items:
        path = item.path
        if (SLOW_FOLDERS & set(path.parts) or path.stem in SLOW_MODULES or path.stem.startswith(SLOW_PREFIXES)
                or getattr(item, "originalname", item.name) in SLOW_TESTS):
            item.add_marker(slow)
    if xdist_support.WORKER is not None:  # the long groups start first, the quick ones fill the end
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """`-n N --dist loadscope`: each worker takes whole groups (`xdist_support.group_of`), not single tests."""
    return xdist_support.GroupScheduling(config, log) if config.getvalue("dist") == "loadscope" else None


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Under pytest-xdist: the summaries the workers' suites wrote (the fault sweep, the fuzzer, the edge table)."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        xdist_support.print_gathered(terminalreporter)


def pytest_configure(config: pytest.Config) -> None:
    xdist_support.start_gathering()


@pytest.fixture(autouse=True)
def _no_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never reach a real model, even on a machine that has a key."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture(scope="module")
def running_server() -> Iterator[OpenAIServer]:
    """The local OpenAI-compatible server (tests/support/openai_server.py), one per test module that asks for it."""
    from openai_server import serve

    with serve() as started:
        yield started


@pytest.fixture
def server(running_server: OpenAIServer) -> Iterator[OpenAIServer]:
    """The server with a clean script and request log; a scripted reply nobody asked for fails the test."""
    running_server.reset()
    yield running_server
    problems = running_server.finish()
    assert not problems, problems
