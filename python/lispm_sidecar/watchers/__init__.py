"""Watchers that tell, from each agent CLI's own records, whether the agent
is waiting for its user (idle), busy, or waiting for an approval.

One `Inotify` per sidecar serves every watcher::

    inotify = Inotify()
    watcher = make_watcher("codex", inotify, home=Path.home(), pid=pid,
                           cwd=folder, session_id=None)
    watcher.subscribe(lambda: print(watcher.activity, watcher.prompts_seen))
    await watcher.start()
"""

from __future__ import annotations

import os
from pathlib import Path

from .base import AgentActivity, Watcher
from .codex import CodexWatcher, codex_home_for
from .hermes import HermesWatcher, hermes_home_for
from .inotify import Inotify

__all__ = ["AgentActivity", "CodexWatcher", "HermesWatcher", "Inotify", "Watcher",
           "codex_home_for", "hermes_home_for", "make_watcher"]


def make_watcher(kind: str, inotify: Inotify, *, home: Path, pid: int, cwd: Path,
                 session_id: str | None, resumed: bool = False) -> Watcher | None:
    """The watcher for an agent of KIND ("codex" or "hermes"), or None for a
    kind without one.  HOME is the user's home; `$CODEX_HOME` and
    `$HERMES_HOME` in the sidecar's environment take precedence.  PID is the
    terminal's process; SESSION_ID, if RESUMED, the session the CLI was told
    to resume."""
    environ = dict(os.environ)
    if kind == "codex":
        return CodexWatcher(inotify, codex_home_for(home, environ), pid, cwd,
                            resumed_thread=session_id if resumed else None)
    if kind == "hermes":
        return HermesWatcher(inotify, hermes_home_for(home, environ), pid, cwd,
                             resumed_session=session_id if resumed else None)
    return None
