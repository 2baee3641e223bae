"""Differential parity suite: agents.Runner vs agency_swarm (see harness.py and differences.py)."""
