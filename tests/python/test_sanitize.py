"""The sanitiser, by examples and by a fuzz corpus of hostile messages."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from lispm_sidecar.sanitize import is_clean, sanitize

#: The cases that lispm-paste-test.el checks Emacs's last check against, too.
CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).resolve().parents[1] / "sanitize-cases.json").read_text("utf-8"))


@pytest.mark.parametrize("case", CASES, ids=[case["what"] for case in CASES])
def test_examples(case: dict[str, Any]) -> None:
    assert sanitize(case["text"]) == case["clean"]
    assert is_clean(case["clean"])
    assert is_clean(case["text"]) == (case["text"] == case["clean"])


_INVISIBLE = set(range(0x202A, 0x202F)) | set(range(0x2066, 0x206A)) | set(range(0xE0000, 0xE0080))
_ZERO_WIDTH = set(range(0x200B, 0x2010)) | set(range(0x2060, 0x2065)) | {0x061C, 0xFEFF}


def _kept(text: str) -> str:
    """What the cleaner keeps of TEXT, written out another way, character by character."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = "".join(ch for ch in text if ch in "\n\t" or not (
        ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F or ord(ch) in _INVISIBLE))
    kept = []
    for i, ch in enumerate(text):
        if ord(ch) in _ZERO_WIDTH:
            before = next((c for c in reversed(text[:i]) if ord(c) not in _ZERO_WIDTH), " ")
            after = next((c for c in text[i + 1:] if ord(c) not in _ZERO_WIDTH), " ")
            if before.isspace() or after.isspace():
                continue
        kept.append(ch)
    return "".join(kept)


def _hostile(rng: random.Random) -> str:
    pieces = [
        "\x1b[201~", "\x1b[200~", "\r", "\r\n", "\n", "\x03", "\x04", "\x1a", "\x1b",
        "\x1b[A", "\x1b]52;c;aGk=\x07", "\x9b", "\x9c", "\x90", "\x7f", "\x00", "\t", "y",
        "1", "Yes", " ", "é", "✓", "😀", "\u2028", "\ufeff", "\u202e", "\u2066", "\u2069",
        "\u200b", "\u200d", "\u200f", "\u2060", "\U000e0041", "\u00a0", "\u3000",
    ]
    return "".join(rng.choice(pieces) if rng.random() < 0.6 else chr(rng.randrange(0x20, 0x2FFF))
                   for _ in range(rng.randrange(1, 80)))


def test_fuzz_corpus_never_lets_a_control_through() -> None:
    rng = random.Random(20261130)
    for _ in range(20000):
        text = _hostile(rng)
        clean = sanitize(text)
        # Nothing that can end the paste, press Return or Escape, or send a
        # signal; nothing that reorders the text or hides some.
        assert "\x1b" not in clean and "\r" not in clean
        assert all(ch in "\n\t" or not (ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F
                                         or ord(ch) in _INVISIBLE)
                   for ch in clean), repr(clean)
        # Cleaning is idempotent and keeps every printable character, in order.
        assert sanitize(clean) == clean
        assert clean == _kept(text), repr(text)
