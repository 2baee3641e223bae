"""Remote chart members: agents in other services, reached over the Agent2Agent protocol (A2A)."""
