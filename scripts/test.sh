#!/usr/bin/env bash
# The whole test suite on a fresh machine: creates .venv, installs dev extras, lints, type-checks, tests.
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
echo "== ruff" && .venv/bin/ruff check src tests examples
echo "== mypy (strict, src/)" && .venv/bin/mypy
echo "== pytest" && .venv/bin/python -m pytest --cov --cov-report=term-missing:skip-covered "$@"
