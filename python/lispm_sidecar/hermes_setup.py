"""`python -m lispm_sidecar.hermes_setup`, the name users' notes and
`M-x lispm-hermes-setup` use: the setup is `kinds/hermes/setup.py`."""

import sys

from .kinds.hermes.setup import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
