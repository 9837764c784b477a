"""What may reach an agent's terminal: the one function that cleans a message.

A message is pasted into a CLI's composer inside a bracketed paste
(`ESC[200~` … `ESC[201~`) and submitted with a separate Return.  Nothing in
the text may end the paste early, press a key, or answer a prompt; so the
text that reaches the pty holds printable characters, newlines and tabs
only:

- CR and CRLF become LF (a CR would be Return: it submits, or approves).
- ESC, every other C0 control and DEL are dropped (`ESC[201~` ends the
  paste; `^C` interrupts; a bare ESC cancels).
- C1 controls (U+0080–U+009F) are dropped: a terminal may read U+009B as
  CSI, and U+009C as the end of a string.
"""

from __future__ import annotations

import re

_NEWLINES = re.compile(r"\r\n?")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def sanitize(text: str) -> str:
    """Return TEXT as it may be pasted into a terminal (see the module docstring)."""
    return _CONTROLS.sub("", _NEWLINES.sub("\n", text))


def is_clean(text: str) -> bool:
    """Return True if TEXT holds nothing `sanitize` would change."""
    return _CONTROLS.search(text) is None and "\r" not in text
