"""Reference system 1: an HR assistant whose agents, prompts and plan schema are all built from one registry."""
