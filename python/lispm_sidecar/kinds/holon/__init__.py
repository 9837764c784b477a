"""Holon: agents of a daemon, prompted through its control endpoint."""
