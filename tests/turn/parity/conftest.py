"""Parity suite fixtures: every scenario runs blocking and streamed, with agency_swarm's SDK shortcuts off and on."""

from __future__ import annotations

from collections.abc import Iterator

import agents
import pytest

import xdist_support
from parity.harness import shortcuts_module

agents.set_tracing_disabled(True)


@pytest.fixture(params=[False, True], ids=["blocking", "streamed"])
def stream(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture(params=[False, True], ids=["sdk-paths", "shortcuts"])
def shortcuts(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[bool]:
    """`agency_swarm._sdk.SHORTCUTS` off (the SDK's own code paths) and on (our fast paths)."""
    sdk = shortcuts_module()
    if sdk is None:
        if request.param is False:
            pytest.skip("agency_swarm._base._sdk not present yet")
        yield True  # today's code: the shortcuts are always on
        return
    monkeypatch.setattr(sdk, "SHORTCUTS", request.param)
    yield bool(request.param)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--long", action="store_true", default=False,
        help="parity fuzzer: run 10,000 generated cases (PARITY_FUZZ_CASES=N sets any number) with a random seed",
    )


def summary_lines() -> list[str]:
    from parity import test_fuzz

    return test_fuzz.SUMMARY.lines() if test_fuzz.SUMMARY.cases else []


@pytest.fixture(scope="session", autouse=True)
def _summary_for_the_controller() -> Iterator[None]:
    yield
    xdist_support.keep_summary("parity fuzzer", summary_lines())


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The fuzzer's summary (cases, time, differences found), when it ran."""
    for line in summary_lines():
        terminalreporter.write_line(line)
