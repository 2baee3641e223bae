"""Fault injection: stores and models that fail at the k-th operation, and the invariants every fault must keep."""
