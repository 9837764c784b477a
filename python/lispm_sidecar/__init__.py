"""The Python sidecar of LispM: per-agent MCP servers and the link to Emacs."""

__version__ = "0.1.0"

#: Bumped whenever a method or a parameter of the Emacs link changes meaning.
PROTOCOL_VERSION = 1
