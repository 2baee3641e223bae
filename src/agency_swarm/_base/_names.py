"""Reserved names: the person talking to the agency, and the tool agents message each other with."""

USER = "user"
"""The sender of every message the user types; no agent may take this name."""
SEND_MESSAGE = "send_message"
"""The tool an agent gets when the chart lets it message others; no tool of its own may take this name."""
