"""Threads and where they live: `ThreadManager`, `ConversationThread`, the store protocol and its stores.

`_store` (the protocol, memory and callback stores), `_manager` (threads, chat ids, turn locks, clean-up),
`_file_store` (JSONL files), `_sql_store` (SQLite and PostgreSQL), `_dir_lock` (one process per threads dir).
Imports only `_base`; the file and SQL stores load on first use.
"""
