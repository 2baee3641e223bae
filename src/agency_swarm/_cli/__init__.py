"""The `agency-swarm` command: run, serve, visualize, demo, and the terminal chat. The top layer."""
