"""An OpenClaw session's state, from its Gateway.

The Gateway publishes `sessions.changed` events (after `sessions.subscribe`)
whose `session` row says whether a run is going (`hasActiveRun`,
`status: "running"`).  The watcher reads the row once when it starts or
the connection comes back (`sessions.describe`) and then follows the
events; nothing is polled.  While the connection is down the state is
unknown.

A message is handed over only while the session is idle, as for the
terminal agents.  The Gateway's `agent` request would hold a message that
arrives during a run, but not reliably while the run is still preparing:
on a loaded machine the Gateway made such a message the turn's prompt and
kept the user's own as "context only".  The `agent` request still covers
a run that starts just as the message goes in.  A message counts as picked
up once the Gateway has accepted it (the hand-over says so).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...watchers.base import AgentActivity, Watcher

if TYPE_CHECKING:
    from .gateway import OpenClaw

log = logging.getLogger(__name__)


def session_busy(row: dict[str, Any]) -> bool:
    """Whether the Gateway's session ROW shows a run going."""
    return bool(row.get("hasActiveRun")) or row.get("status") == "running"


class OpenClawWatcher(Watcher):
    """Follows session KEY of OPENCLAW's Gateway; ON_REACHED once it is there."""

    kind = "openclaw"

    def __init__(self, openclaw: OpenClaw, key: str,
                 on_reached: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.openclaw = openclaw
        self.key = key
        self.last_row: dict[str, Any] = {}
        self._on_reached = on_reached
        self._reading: asyncio.Task[None] | None = None

    @property
    def cli_session(self) -> str | None:
        """The Gateway's session key: an agent of the same name opens it again."""
        return self.key

    async def start(self) -> None:
        self.openclaw.listen(self.key, self._event)
        self._read_row()

    async def stop(self) -> None:
        self.openclaw.unlisten(self.key, self._event)
        if self._reading is not None:
            self._reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reading
            self._reading = None

    def describe(self) -> dict[str, Any]:
        return dict(self._state(), session_key=self.key,
                    gateway=self.openclaw.target.url if self.openclaw.target else None)

    def _read_row(self) -> None:
        if self._reading is None or self._reading.done():
            self._reading = asyncio.create_task(self._describe(), name=f"openclaw:{self.key}")

    async def _describe(self) -> None:
        from ...errors import LispmError

        try:
            row = await self.openclaw.describe_session(self.key)
        except LispmError as err:
            log.info("openclaw %s: %s", self.key, err)
            self._update(AgentActivity.UNKNOWN)
            return
        self._row(row)

    def _row(self, row: dict[str, Any]) -> None:
        self.last_row = row
        self._update(AgentActivity.BUSY if session_busy(row) else AgentActivity.IDLE)
        if self._on_reached is not None:
            reached, self._on_reached = self._on_reached, None
            reached()

    def _event(self, event: str, payload: dict[str, Any]) -> None:
        if event == "lost":
            self._update(AgentActivity.UNKNOWN)
        elif event == "reconnected":
            self._read_row()
        elif event == "sessions.changed" and isinstance(payload.get("session"), dict):
            self._row(payload["session"])
