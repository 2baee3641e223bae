"""Reference system 3: an orchestrator whose prompt lists, via {{AVAILABLE_AGENTS}}, the agents it can reach."""
