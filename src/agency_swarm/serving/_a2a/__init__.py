"""The agency as an A2A agent: Agent Card, JSON-RPC and HTTP+JSON transports (a2a-sdk's), tasks in our store."""
