"""Reference system 2: agencies described in YAML (a flat team and departments), run with pauses for approval."""
