"""Codex: a terminal agent, bound to the rollout file its process holds open."""
