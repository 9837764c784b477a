"""Run the sidecar: `python -m lispm_sidecar`, speaking JSON-RPC on stdio.

Emacs starts it; it stops when Emacs closes its stdin or asks it to.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys

from .app import Sidecar
from .rpc import EmacsLink
from .stdio import open_stdio, read_frames


async def serve() -> None:
    """Serve Emacs on stdio until end of input or `lispm/shutdown`."""
    reader, writer = await open_stdio()
    link = EmacsLink()
    link.attach(writer)
    sidecar = Sidecar(link)
    reading = asyncio.create_task(read_frames(reader, link.receive, link.frame_error))
    stopping = asyncio.create_task(sidecar.stopping.wait())
    await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
    # Emacs gone (end of input): its terminals, and so the agents, are gone too.
    await sidecar.close_mcp()
    await sidecar.agents.stop_all(keep_files=not reading.done())
    for task in (reading, stopping):
        task.cancel()


def main() -> None:
    """Entry point of `python -m lispm_sidecar` and the `lispm-sidecar` script."""
    logging.basicConfig(
        stream=sys.stderr,
        level=os.environ.get("LISPM_SIDECAR_LOG", "WARNING").upper(),
        format="lispm-sidecar %(levelname)s %(name)s: %(message)s",
    )
    # pygls logs every error it sends as an error of its own; the sidecar
    # logs what matters at its RPC boundary.
    logging.getLogger("pygls").setLevel(logging.CRITICAL)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


if __name__ == "__main__":
    main()
