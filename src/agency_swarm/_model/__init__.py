"""Calling a model safely: `RetryPolicy` and `RetryingModel` (retries, timeouts, error mapping), usage and cost.

Imports only `_base`.
"""
