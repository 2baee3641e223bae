"""Agencies from YAML or JSON files: reading, the schema, and errors naming file, line and key.

Builds agents and stores from `_turn`, `_threads` and `_model`; hands the finished parts to whatever class
asks (`Agency.from_config`), so it never imports the agency itself.
"""
