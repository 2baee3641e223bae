"""One turn: the agent, its wiring, the loop and what it runs (tools, send_message, guardrails, hooks, tracing).

From the bottom: `_definition` (what the loop needs of an agent, and its wiring), the tools and messaging
modules, `_channel` (events to a reader and to hooks), `_results`, the loop, and `_agent` (the public `Agent`,
whose `get_response` starts the loop). Imports `_base`, `_threads` and `_model`.
"""
