"""`python -m lispm_sidecar.lispm_tool`, the module an earlier install's
`lispm-tool` script names: the command is `kinds/holon/cli.py`."""

from .kinds.holon.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    main()
