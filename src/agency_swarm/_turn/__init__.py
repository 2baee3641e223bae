"""One turn: the agent, its wiring, the loop and what it runs (tools, send_message, guardrails, hooks, tracing).

From the bottom: `_definition` (what the loop needs of an agent, and its wiring), `_setup`, the tools and
messaging modules, `_channel` (events to a reader and to hooks), `_results`, `_state` (`Run`, `Turn`), then what
the loop calls (`_prepare`, `_history`, `_model_call`, `_steps`, `_calls`, `_entry`), the loop itself, and `_agent`
(the public `Agent`, whose `get_response` starts it). Imports `_base`, `_threads` and `_model`.
"""
