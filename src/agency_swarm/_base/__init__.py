"""The floor every layer stands on: errors, events, the SDK boundary, reserved names; imports none of ours.

`_errors` (the exception tree), `_events` (stream events), `_sdk` (the one module using private openai-agents
names, each with a public fallback), `_items` (stored item shapes), `_names` (reserved names), `_placeholders`
(`{name}` checks), `_sync` (blocking helpers and which turns a running tool is inside), `_redact` (the one redaction
of keys and tokens, and the logging filter that applies it).
"""
