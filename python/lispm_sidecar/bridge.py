"""`python -m lispm_sidecar.bridge`, the name users' Hermes configs run:
the bridge is `stdio_bridge.py`."""

from .stdio_bridge import main

__all__ = ["main"]

if __name__ == "__main__":
    main()
