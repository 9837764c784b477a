"""LispM's own agent: an actor that lives in Emacs, with no terminal and no MCP server."""
