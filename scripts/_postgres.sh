# Sourced by test.sh: which PostgreSQL the tests use (AGENCY_SWARM_TEST_POSTGRES_URL, default the local `test`
# database) and, when it does not answer, that its tests are skipped (they fail under CI=true) and how to start it.
.venv/bin/python tests/support/postgres_support.py
