"""Claude Code: a terminal agent that also reaches Emacs through its IDE protocol."""
