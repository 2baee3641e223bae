"""Reference system 4: planner / executor / verifier with a shared memory, step and time limits, a JSON audit log."""
