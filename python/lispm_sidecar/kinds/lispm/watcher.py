"""An agent's state as Emacs reports it: the agent lives in Emacs.

LispM's own agent has no CLI whose records could be read: Emacs runs it,
so Emacs says what it is doing (`lispm/actor-activity`).  `idle` lets its
queue hand a message over; anything else, or nothing said yet, waits.
"""

from __future__ import annotations

from typing import Any

from ...watchers.base import AgentActivity, Watcher

#: What Emacs reports, in the watchers' terms; any other activity
#: (busy, running-tool, waiting-for-reply, ...) is BUSY.
_ACTIVITY = {
    "idle": AgentActivity.IDLE,
    "waiting-for-approval": AgentActivity.WAITING_FOR_APPROVAL,
}


class ReportedActivity(Watcher):
    """Follows what Emacs reports of an agent that lives in Emacs."""

    kind = "lispm"

    def __init__(self) -> None:
        super().__init__()
        #: The activity as Emacs last said it, or None.
        self.reported: str | None = None
        #: How many reports came: a refusal counts only if none came since.
        self.reports = 0

    def report(self, activity: str | None) -> None:
        """Emacs says the agent is doing ACTIVITY (None: it does not say)."""
        self.reports += 1
        self.reported = activity
        if activity is None:
            self._update(AgentActivity.UNKNOWN)
        else:
            self._update(_ACTIVITY.get(activity, AgentActivity.BUSY))

    def refused(self, reports_before: int) -> None:
        """Emacs did not take a message although it had said the agent was
        idle: it is not, whatever it said, until its next report.  A report
        that came since REPORTS_BEFORE (the count when the message went out)
        stands: it is newer than the refusal.

        Nothing is told: Emacs knows what its agent is doing."""
        if self.reports == reports_before:
            self.activity = AgentActivity.UNKNOWN

    async def start(self) -> None:
        """Nothing to watch: the reports come from Emacs."""

    async def stop(self) -> None:
        """Nothing to release."""

    def describe(self) -> dict[str, Any]:
        return dict(self._state(), reported=self.reported)
