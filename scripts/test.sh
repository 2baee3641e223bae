#!/usr/bin/env bash
# The whole test suite on a fresh machine: creates .venv, installs dev extras, lints, type-checks, tests.
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
echo "== ruff" && .venv/bin/ruff check src tests examples benchmarks
echo "== mypy (strict, src/)" && .venv/bin/mypy
echo "== benchmark smoke (numbers: see benchmarks/)" && .venv/bin/python benchmarks/w5_file_store.py --turns 30
if ! command -v chromium >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  echo "== installing chromium (tests/test_visualize.py renders the chart in it)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 \
    || echo "   could not install chromium; tests/test_visualize.py will say what to do"
fi
echo "== pytest" && .venv/bin/python -m pytest --cov --cov-report=term-missing:skip-covered "$@"
