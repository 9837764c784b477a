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

Nor may it show the reader something other than what the agent gets:

- the bidirectional embeddings, overrides and isolates (U+202A–U+202E,
  U+2066–U+2069) are dropped, so text displays in the order it was sent;
- the tag characters (U+E0000–U+E007F), invisible text that a model reads,
  are dropped (a subdivision flag such as Scotland's shows as a black flag);
- the zero-width characters (U+200B–U+200F: space, non-joiner, joiner and
  the direction marks; U+2060–U+2064: word joiner and invisible operators;
  U+061C, U+FEFF) are kept only inside a word, that is between two
  characters that are not white space: a joiner in an emoji or a Persian
  word stays, one at the start or the end of the text or next to a space
  goes.

Everything else passes as it is.  `lispm-paste.el` refuses what this
would change, tested against the same cases (tests/sanitize-cases.json).
"""

from __future__ import annotations

import re

_NEWLINES = re.compile(r"\r\n?")
_DROPPED = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\U000e0000-\U000e007f]")
_ZERO_WIDTH = re.compile("[\u200b-\u200f\u2060-\u2064\u061c\ufeff]+")
#: White space, once the controls are gone (what `str.isspace` holds besides them).
_SPACE = frozenset(" \t\n\u00a0\u1680\u2028\u2029\u202f\u205f\u3000"
                   + "".join(map(chr, range(0x2000, 0x200B))))


def _inside_a_word(zero_width: re.Match[str]) -> str:
    text, before, after = zero_width.string, zero_width.start() - 1, zero_width.end()
    if before >= 0 and after < len(text) and text[before] not in _SPACE \
            and text[after] not in _SPACE:
        return zero_width.group()
    return ""


def sanitize(text: str) -> str:
    """Return TEXT as it may be pasted into a terminal (see the module docstring)."""
    return _ZERO_WIDTH.sub(_inside_a_word, _DROPPED.sub("", _NEWLINES.sub("\n", text)))


def is_clean(text: str) -> bool:
    """Return True if TEXT holds nothing `sanitize` would change."""
    return sanitize(text) == text
