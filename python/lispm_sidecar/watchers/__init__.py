"""The machinery every kind's watcher stands on: one watcher tells, from
an agent CLI's own records, whether the agent is waiting for its user
(idle), busy, or waiting for an approval.

`base.py` has the `Watcher` interface, `inotify.py` the one `Inotify`
per sidecar that serves every watcher, and `tail.py` the reading of an
append-only file.  Each kind's own watcher is in its package
(`kinds/<kind>/watcher.py`)::

    inotify = Inotify()
    watcher = claude_watcher(inotify, home=Path.home(), pid=pid, cwd=folder,
                             session_id=session_id)
    watcher.subscribe(lambda: print(watcher.activity, watcher.prompts_seen))
    await watcher.start()
"""

from __future__ import annotations

from .base import AgentActivity, Watcher
from .inotify import Inotify

__all__ = ["AgentActivity", "Inotify", "Watcher"]
