"""The edge suite: real `agency-swarm serve` processes, one per store, under generated hostile requests."""
