"""The sanitiser, by examples and by a fuzz corpus of hostile messages."""

from __future__ import annotations

import random

import pytest

from lispm_sidecar.sanitize import is_clean, sanitize

PASTE_END = "\x1b[201~"


@pytest.mark.parametrize(
    ("text", "clean"),
    [
        ("hello\nworld\ttab", "hello\nworld\ttab"),
        ("line one\r\nline two\rthree", "line one\nline two\nthree"),
        (f"inject{PASTE_END}\rrm -rf ~\r", "inject[201~\nrm -rf ~\n"),
        ("stop\x03 now\x1b", "stop now"),
        ("bell\x07 back\x08space del\x7f", "bell backspace del"),
        ("c1 \x9b31m csi \x9c st \x85 nel", "c1 31m csi  st  nel"),
        ("osc \x1b]0;title\x07 done", "osc ]0;title done"),
        ("unicode ✓ 日本 😀 — ok", "unicode ✓ 日本 😀 — ok"),
        ("", ""),
    ],
)
def test_examples(text: str, clean: str) -> None:
    assert sanitize(text) == clean
    assert is_clean(sanitize(text))


def _hostile(rng: random.Random) -> str:
    pieces = [
        "\x1b[201~", "\x1b[200~", "\r", "\r\n", "\n", "\x03", "\x04", "\x1a", "\x1b",
        "\x1b[A", "\x1b]52;c;aGk=\x07", "\x9b", "\x9c", "\x90", "\x7f", "\x00", "\t", "y",
        "1", "Yes", " ", "é", "✓", "😀", "\u2028", "\ufeff",
    ]
    return "".join(rng.choice(pieces) if rng.random() < 0.6 else chr(rng.randrange(0x20, 0x2FFF))
                   for _ in range(rng.randrange(1, 80)))


def test_fuzz_corpus_never_lets_a_control_through() -> None:
    rng = random.Random(20261130)
    for _ in range(20000):
        text = _hostile(rng)
        clean = sanitize(text)
        # Nothing that can end the paste, press Return or Escape, or send a signal.
        assert "\x1b" not in clean and "\r" not in clean
        assert all(ch in "\n\t" or not (ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F)
                   for ch in clean), repr(clean)
        # Cleaning is idempotent and keeps every printable character, in order.
        assert sanitize(clean) == clean
        kept = [ch for ch in text.replace("\r\n", "\n").replace("\r", "\n")
                if ch in "\n\t" or not (ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F)]
        assert clean == "".join(kept)
