#!/usr/bin/env bash
# The whole test suite on a fresh machine: creates .venv, installs dev extras, lints, type-checks, tests.
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
echo "== ruff" && .venv/bin/ruff check src tests examples benchmarks
echo "== mypy (strict, src/)" && .venv/bin/mypy
echo "== benchmark smoke (numbers: see benchmarks/)" && .venv/bin/python benchmarks/w5_file_store.py --turns 30
source scripts/_node.sh     # the AG-UI client (npm ci in tests/js); without node, tests/test_ag_ui_js.py skips
source scripts/_chromium.sh  # as root without Chromium: apt-get installs it (AGENCY_SWARM_SKIP_CHROMIUM=1 skips)
if command -v npm >/dev/null; then  # the @a2a-js/sdk client the A2A tests drive under node
  echo "== npm ci (tests/js_a2a)" && (cd tests/js_a2a && npm ci --no-audit --no-fund --silent)
else
  echo "== WARNING: node/npm missing: tests/test_a2a_js.py (the @a2a-js/sdk client) will be SKIPPED" >&2
fi
echo "== pytest" && .venv/bin/python -m pytest --cov --cov-report=term-missing:skip-covered "$@"
