"""The scripted gateway, also noting when it finished each reply: for the agent benchmarks.

    python tests/bench/timed_gateway.py PORT_FILE SCRIPT_JSON [LATENCY_MS]

Every request's entry in `GET /_gateway/requests` gains `end_t` (Unix
seconds): when its reply was written whole (after the stream's last
byte), beside the gateway's own `t`, when the request arrived.  With
LATENCY_MS (default 0), the gateway waits that many milliseconds before
it answers each model request (after logging it, before the first byte
of its reply), as a model's time to first token; its control routes
(`/_gateway/...`) answer at once.  It runs until SIGTERM or SIGINT, in a
process of its own as in `make demo`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from lispm_sidecar.testing.gateway import Dialect, Gateway
from lispm_sidecar.testing.gateway_cache import Prompt
from lispm_sidecar.testing.gateway_script import Decision
from lispm_sidecar.testing.gateway_wire import Exchange, Json


class TimedGateway(Gateway):
    """A `Gateway` whose log entries say when their reply ended (`end_t`).

    It waits LATENCY seconds before answering each model request.
    """

    def __init__(self, script: Any, latency: float = 0.0) -> None:
        super().__init__(script)
        self.latency = latency

    async def _answer(self, request: web.Request, dialect: Dialect, ex: Exchange,
                      decision: Decision, entry: Json, prompt: Prompt) -> web.StreamResponse:
        if self.latency:
            await asyncio.sleep(self.latency)
        response = await super()._answer(request, dialect, ex, decision, entry, prompt)
        entry["end_t"] = time.time()
        return response


async def serve(port_file: Path, script: Path, latency: float = 0.0) -> None:
    """Serve the rules of SCRIPT until told to stop; write the port to PORT_FILE.

    Each model request is answered LATENCY seconds late."""
    gateway = TimedGateway(orjson.loads(script.read_bytes()), latency)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await gateway.start()
    try:
        temp = port_file.with_name(port_file.name + ".tmp")
        temp.write_text(f"{gateway.port}\n")
        os.replace(temp, port_file)
        await stop.wait()
    finally:
        await gateway.stop()


if __name__ == "__main__":
    asyncio.run(serve(Path(sys.argv[1]), Path(sys.argv[2]),
                      float(sys.argv[3]) / 1000 if len(sys.argv) > 3 else 0.0))
