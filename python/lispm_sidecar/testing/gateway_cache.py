"""Prompt caching as the real APIs count it, computed from what the gateway receives.

The gateway's usage reports cache reads and writes the way each API does,
so a client's accounting runs its real path:

- Anthropic caches only up to the blocks a request marks `cache_control`
  (tools, then system, then the messages' blocks, in that order).  A
  prefix up to a marked block is written (if it has 1024 tokens or
  more); a later request reads the
  longest prefix, ending at a block boundary at most 20 blocks before one
  of its marks, that an earlier request wrote.  Its `input_tokens` are
  those neither read nor written.
- OpenAI (Responses and Chat Completions) caches on its own: the longest
  prefix shared with an earlier prompt, in steps of 128 tokens, once the
  prompt has 1024; `cached_tokens` are among `input_tokens`.

A prompt is its canonical bytes (the API's order, each part as sorted
JSON, the cache marks left out); a token is 4 of them.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

Json = dict[str, Any]
#: Bytes per token, as the gateway counts.
TOKEN_BYTES = 4
#: How many blocks before a mark the API looks for a prefix it wrote.
LOOKBACK_BLOCKS = 20
#: Anthropic's least prompt cached, in tokens: a shorter prefix is not written.
ANTHROPIC_MIN_TOKENS = 1024
#: OpenAI's automatic caching: the least prompt cached, and its step.
OPENAI_MIN_TOKENS = 1024
OPENAI_STEP_TOKENS = 128
#: The earlier prompts an OpenAI-style request is compared with.
OPENAI_KEPT = 16


@dataclass(frozen=True)
class Prompt:
    """What a request's prompt counts: its tokens in all, read, written."""

    tokens: int
    cache_read: int = 0
    cache_write: int = 0

    @property
    def uncached(self) -> int:
        """The tokens neither read from the cache nor written to it."""
        return self.tokens - self.cache_read - self.cache_write

    def as_log(self) -> Json:
        return {"tokens": self.tokens, "cache_read": self.cache_read,
                "cache_write": self.cache_write}


def _canonical(value: Any) -> bytes:
    if isinstance(value, Mapping):
        value = {k: v for k, v in value.items() if k != "cache_control"}
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def _anthropic_blocks(body: Json) -> Iterator[tuple[bytes, bool]]:
    """Each block of BODY's prompt, in the API's order, and whether it is marked."""
    for tool in body.get("tools") or []:
        yield b"tool" + _canonical(tool), isinstance(tool, Mapping) and "cache_control" in tool
    system = body.get("system")
    blocks = [{"type": "text", "text": system}] if isinstance(system, str) else system
    for block in blocks if isinstance(blocks, list) else []:
        yield b"system" + _canonical(block), isinstance(block, Mapping) and "cache_control" in block
    for message in body.get("messages") or []:
        if not isinstance(message, Mapping):
            continue
        role = str(message.get("role")).encode()
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks if isinstance(blocks, list) else []:
            marked = isinstance(block, Mapping) and "cache_control" in block
            yield role + _canonical(block), marked


def _openai_prompt(api: str, body: Json) -> bytes:
    parts = [_canonical(body.get("tools") or [])]
    if api == "responses":
        parts.append(_canonical(body.get("instructions") or ""))
        items = body.get("input")
        parts.extend(_canonical(item) for item in (items if isinstance(items, list) else [items]))
    else:
        parts.extend(_canonical(m) for m in body.get("messages") or [])
    return b"\n".join(parts)


def prompt_bytes(api: str, body: Json) -> bytes:
    """BODY's prompt, a request to API, as the cache sees it: canonical bytes."""
    if api == "anthropic":
        return b"\n".join(block for block, _marked in _anthropic_blocks(body))
    return _openai_prompt(api, body)


def common_length(a: bytes, b: bytes) -> int:
    """The length of the longest common prefix of A and B."""
    left, right = memoryview(a), memoryview(b)
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if left[:middle] == right[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


class PromptCache:
    """The prompts an API would hold in its cache, by what the gateway received."""

    def __init__(self) -> None:
        self._written: set[bytes] = set()
        self._openai: deque[bytes] = deque(maxlen=OPENAI_KEPT)

    def clear(self) -> None:
        self._written.clear()
        self._openai.clear()

    def count(self, api: str, body: Json) -> Prompt:
        """The prompt of BODY, a request to API, as cached; the cache takes it."""
        if api == "anthropic":
            return self._anthropic(body)
        prompt = _openai_prompt(api, body)
        tokens = len(prompt) // TOKEN_BYTES
        read = 0
        if tokens >= OPENAI_MIN_TOKENS:
            shared = max((common_length(prompt, earlier) for earlier in self._openai), default=0)
            read = (shared // TOKEN_BYTES) // OPENAI_STEP_TOKENS * OPENAI_STEP_TOKENS
        self._openai.append(prompt)
        return Prompt(tokens, read)

    def _anthropic(self, body: Json) -> Prompt:
        digest = hashlib.sha256()
        hashes: list[bytes] = []
        sizes: list[int] = []
        marks: list[int] = []
        size = 0
        for index, (block, marked) in enumerate(_anthropic_blocks(body)):
            digest.update(len(block).to_bytes(8, "big"))
            digest.update(block)
            size += len(block)
            hashes.append(digest.copy().digest())
            sizes.append(size)
            if marked:
                marks.append(index)
        read = 0
        for mark in marks:
            for index in range(mark, max(-1, mark - LOOKBACK_BLOCKS - 1), -1):
                if hashes[index] in self._written:
                    read = max(read, sizes[index])
                    break
        written = sizes[marks[-1]] if marks else 0
        for mark in marks:
            if sizes[mark] // TOKEN_BYTES >= ANTHROPIC_MIN_TOKENS:
                self._written.add(hashes[mark])
            elif mark == marks[-1]:
                written = 0
        tokens, read_tokens = size // TOKEN_BYTES, read // TOKEN_BYTES
        return Prompt(tokens, read_tokens, max(0, written // TOKEN_BYTES - read_tokens))
