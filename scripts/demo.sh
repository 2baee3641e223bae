#!/usr/bin/env bash
# The main job: an agency (CEO -> Developer -> QA) streaming to the terminal. Offline unless OPENAI_API_KEY is set.
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
exec .venv/bin/python -m agency_swarm demo "$@"
