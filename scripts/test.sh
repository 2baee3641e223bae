#!/usr/bin/env bash
# The whole test suite on a fresh machine: creates .venv, installs dev extras, lints, type-checks, tests; then the
# fast tests on the other CPython versions pyproject claims.
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
make_venv .venv "$PYTHON" dev
source scripts/_other_pythons.sh && other_pythons_start  # .venv-3.12 and .venv-3.13 install meanwhile
echo "== ruff" && .venv/bin/ruff check src tests examples benchmarks
echo "== mypy (strict, src/)" && .venv/bin/mypy
echo "== benchmark smoke (numbers: see benchmarks/)" && .venv/bin/python benchmarks/w5_file_store.py --turns 30
source scripts/_node.sh     # the AG-UI client (npm ci in tests/js); without node, tests/protocols/test_ag_ui_js.py skips
source scripts/_chromium.sh  # as root without Chromium: apt-get installs it (AGENCY_SWARM_SKIP_CHROMIUM=1 skips)
if command -v npm >/dev/null; then  # the @a2a-js/sdk client the A2A tests drive under node
  echo "== npm ci (tests/js_a2a)" && (cd tests/js_a2a && npm ci --no-audit --no-fund --silent)
else
  echo "== WARNING: node/npm missing: tests/protocols/test_a2a_js.py (the @a2a-js/sdk client) will be SKIPPED" >&2
fi
source scripts/_postgres.sh  # says which PostgreSQL the tests use, and what happens without it
echo "== mkdocs build --strict (the guide; a broken link or reference fails)" \
  && NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir "$(mktemp -d)"
other_pythons_wait  # their installs are done before the suite, whose servers' answer times they would skew
# Coverage doubles the time of the CPU-bound suites (fault sweeps, fuzzers): COVERAGE=1 asks for it.
COVERAGE_ARGS=()
if [ "${COVERAGE:-}" = 1 ]; then COVERAGE_ARGS=(--cov --cov-report=term-missing:skip-covered); fi
# PYTEST_WORKERS processes share the tests (pytest-xdist; each its own PostgreSQL database), 0 runs them in this one.
WORKER_ARGS=()
if [ "${PYTEST_WORKERS:-2}" != 0 ]; then WORKER_ARGS=(-n "${PYTEST_WORKERS:-2}" --dist loadscope); fi
echo "== pytest" && .venv/bin/python -m pytest "${WORKER_ARGS[@]}" "${COVERAGE_ARGS[@]}" "$@"
other_pythons_test  # the fast tests on CPython 3.12 and 3.13
