#!/usr/bin/env bash
# The main job: an agency (CEO -> Developer -> QA) streaming to the terminal. Offline unless OPENAI_API_KEY is set.
# Creates .venv with the package alone (no development tools) on first use.
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
make_venv .venv "$PYTHON" ""
exec .venv/bin/python -m agency_swarm demo "$@"
