"""A Holon agent's state, from its daemon.

The watcher follows the agent's event stream (`GET
/api/agents/{id}/events/stream`, SSE) and, after each event and on each
(re)connection, reads `GET /api/agents/{id}/state`: a current run means
busy, none means idle.  Nothing is polled: an idle agent costs one open
connection.  When the stream drops the state is unknown until it is back
(retried after 1, 2, 4 … up to 30 s).

Holon takes a prompt into a running turn at its next safe point, so a
message may go in while the agent is busy (`accepts_delivery`); it counts
as picked up once the daemon has accepted it (the hand-over says so).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...watchers.base import AgentActivity, Watcher

if TYPE_CHECKING:
    from .daemon import HolonDaemon

log = logging.getLogger(__name__)


class HolonWatcher(Watcher):
    """Follows agent AGENT_ID of DAEMON; ON_REACHED once the daemon knows it."""

    kind = "holon"

    def __init__(self, daemon: HolonDaemon, agent_id: str,
                 on_reached: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.daemon = daemon
        self.agent_id = agent_id
        self.last_state: dict[str, Any] = {}
        self._on_reached = on_reached
        self._task: asyncio.Task[None] | None = None
        self._seq = 0

    def accepts_delivery(self) -> bool:
        """Holon takes prompts while idle and, at a safe point, while busy."""
        return self.activity in (AgentActivity.IDLE, AgentActivity.BUSY)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._follow(), name=f"holon-watch:{self.agent_id}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def describe(self) -> dict[str, Any]:
        return dict(self._state(), daemon=self.daemon.base, agent_id=self.agent_id,
                    daemon_state=self.last_state)

    async def _read_state(self) -> None:
        from .daemon import DaemonError

        try:
            state = await self.daemon.state(self.agent_id)
        except DaemonError as err:
            log.info("holon %s: %s", self.agent_id, err)
            self._update(AgentActivity.UNKNOWN)
            return
        self.last_state = state
        busy = state.get("current_run_id") is not None or state.get("status") not in (
            None, "idle")
        self._update(AgentActivity.BUSY if busy else AgentActivity.IDLE)
        if self._on_reached is not None:
            reached, self._on_reached = self._on_reached, None
            reached()

    async def _follow(self) -> None:
        import aiohttp

        delay = 1.0
        url = f"{self.daemon.base}/api/agents/{self.agent_id}/events/stream"
        while True:
            try:
                async with self.daemon.http().get(
                        url, params={"after_seq": str(self._seq)},
                        headers=self.daemon.headers) as resp:
                    if resp.status == 200:
                        delay = 1.0
                        await self._read_state()
                        async for raw in resp.content:
                            line = raw.decode(errors="replace").strip()
                            if line.startswith("id:"):
                                with contextlib.suppress(ValueError):
                                    self._seq = int(line[3:].strip())
                            elif not line:
                                await self._read_state()
                    else:
                        log.info("holon %s: events answered %d", self.agent_id, resp.status)
            except (aiohttp.ClientError, TimeoutError) as err:
                log.info("holon %s: events stream: %s", self.agent_id, err)
            self._update(AgentActivity.UNKNOWN)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)
