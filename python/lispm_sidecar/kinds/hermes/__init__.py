"""Hermes: a terminal agent, its tools through the stdio bridge, its state from `state.db`."""
