"""Model streams: one HTTP request each, its answer sent to Emacs as events.

`lispm/model-stream` answers `{}` at once; the answer then arrives as
`lispm/model-event` notifications, in order, for that stream id:

- `text` deltas, coalesced: a text event goes once 20 ms have passed since
  the first text not yet sent, or at once when 8192 characters wait, and
  always before any other event, so Emacs gets at most about one text
  event per 20 ms however finely the model streams;
- `reasoning` deltas, coalesced as text is ({text}); where the API marks
  a block of reasoning's end, a `reasoning` event without text, with the
  block's `signature` or `redacted` data (Anthropic's), which the
  reasoning needs to go back to that API;
- each `tool_call` once complete, its `arguments` the raw JSON text as the
  model wrote it (malformed or not: Emacs decides);
- `usage` (when the API reports it): the prompt's tokens in all, those
  read from the API's cache and written to it among them, the answer's,
  and its reasoning's among those; just before
- exactly one end: `done` with a neutral `stop_reason` (`end_turn`,
  `tool_use`, `max_tokens`, or what the API said), or `error` with a
  `message`, and for an HTTP error its `status` and the first 4096 bytes
  of its `body`.  A body that ends before the API's last event, a dropped
  connection, and a connect or read timeout are errors too.

`lispm/model-cancel` closes the HTTP response; a cancelled stream sends
nothing more, not even an error: Emacs, which cancelled it, knows.

The key comes from a file Emacs wrote (read, then unlinked; refused if
others may read it) or from an environment variable of the sidecar.  It
goes in the request's header and nowhere else: never logged, and taken
out of any error text or body the server sends back.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

import orjson

from .. import protocol
from ..errors import InvalidParams, LispmError
from ..protocol import (
    ModelCancelParams,
    ModelCancelResult,
    ModelErrorKind,
    ModelEventParams,
    ModelStreamResult,
)
from . import anthropic, chat, neutral, responses
from .conversations import Conversations
from .neutral import (
    CallPart,
    Dialect,
    Done,
    Failed,
    ModelRequest,
    Part,
    Reasoning,
    Text,
    ThoughtEnd,
    Usage,
)
from .sse import SseDecoder, SseError

if TYPE_CHECKING:
    import aiohttp

    from ..rpc import EmacsLink

log = logging.getLogger(__name__)

DIALECTS: dict[str, Dialect] = {"anthropic": anthropic, "responses": responses, "chat": chat}
#: A text event waits at most this long for more text.
COALESCE_SECONDS = 0.02
#: A text event goes at once when this many characters wait.
COALESCE_CHARS = 8192
#: How much of an HTTP error's body reaches Emacs.
ERROR_BODY_BYTES = 4096
#: The longest key file read.
MAX_KEY_BYTES = 64 * 1024
#: The body bytes read between two turns given to the rest of the loop.
YIELD_BYTES = 256 * 1024


class ModelKeyError(LispmError):
    """The model's key cannot be had: the key file or variable is missing or unsafe."""

    code = -32028


def _read_key_file(path: str) -> str:
    """The key in PATH, a file only this user may read; PATH is unlinked."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as err:
        raise ModelKeyError(f"cannot read the key file {path}: {err.strerror}") from None
    try:
        info = os.fstat(fd)
        try:
            os.unlink(path)
        except OSError as err:
            log.warning("could not remove the key file %s: %s", path, err.strerror)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            raise ModelKeyError(f"the key file {path} is not a file of this user's: refused")
        if info.st_mode & 0o077:
            raise ModelKeyError(f"the key file {path} may be read by others "
                                f"(mode {stat.S_IMODE(info.st_mode):o}): refused")
        data = os.read(fd, MAX_KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_KEY_BYTES:
        raise ModelKeyError(f"the key file {path} is longer than {MAX_KEY_BYTES} bytes")
    key = data.decode("utf-8", "replace").strip()
    if not key:
        raise ModelKeyError(f"the key file {path} is empty")
    return key


def read_key(key_file: str | None, key_env: str | None) -> str | None:
    """The key from KEY_FILE (preferred) or the variable KEY_ENV; None for neither."""
    if key_file:
        return _read_key_file(key_file)
    if key_env:
        value = os.environ.get(key_env, "").strip()
        if not value:
            raise ModelKeyError(f"the environment variable {key_env} is not set in the sidecar")
        return value
    return None


def redact(text: str, key: str | None) -> str:
    """TEXT with KEY replaced by `[key]`."""
    return text.replace(key, "[key]") if key and len(key) >= 4 else text


class _Out:
    """One stream's way to Emacs: coalesces text, sends nothing once closed."""

    def __init__(self, link: EmacsLink, stream: str) -> None:
        self.link = link
        self.stream = stream
        self.closed = False
        self._text: list[str] = []
        self._kind: Literal["text", "reasoning"] = "text"
        self._size = 0
        self._timer: asyncio.TimerHandle | None = None

    def send(self, event: ModelEventParams) -> None:
        if not self.closed:
            self.link.notify(protocol.MODEL_EVENT, event)

    def text(self, text: str, kind: Literal["text", "reasoning"] = "text") -> None:
        if not text or self.closed:
            return
        if kind != self._kind:
            self.flush()
            self._kind = kind
        self._text.append(text)
        self._size += len(text)
        if self._size >= COALESCE_CHARS:
            self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(COALESCE_SECONDS, self.flush)

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._text:
            text = "".join(self._text)
            self._text, self._size = [], 0
            self.send({"stream": self.stream, "type": self._kind, "text": text})

    def finish(self, event: ModelEventParams) -> None:
        self.flush()
        self.send(event)
        self.close()

    def close(self) -> None:
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._text.clear()


def _error(stream: str, kind: ModelErrorKind, message: str, status: int | None = None,
           body: str | None = None) -> ModelEventParams:
    event: ModelEventParams = {"stream": stream, "type": "error", "kind": kind,
                               "message": message}
    if status is not None:
        event["status"] = status
    if body is not None:
        event["body"] = body
    return event


def _detail(body: str) -> str:
    """The error message inside an API's error BODY, else its start."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.strip()[:200]
    error = value.get("error") if isinstance(value, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(error, str):
        return error
    if isinstance(value, dict) and isinstance(value.get("message"), str):
        return str(value["message"])
    return body.strip()[:200]


class ModelStreams:
    """The model streams under way, by Emacs's stream id."""

    def __init__(self, link: EmacsLink) -> None:
        self.link = link
        self._live: dict[str, tuple[asyncio.Task[None], _Out]] = {}
        self._session: aiohttp.ClientSession | None = None
        self.conversations = Conversations()

    async def start(self, params: protocol.ModelStreamParams) -> ModelStreamResult:
        """Start the stream PARAMS describe; its events follow.

        A request building on a revision of its conversation the sidecar
        does not hold starts nothing and answers `stale`; its key file,
        if any, is left for the whole request that follows."""
        stream = params["stream"]
        if params["api"] not in DIALECTS:
            raise InvalidParams(f"api must be one of {', '.join(DIALECTS)}, "
                                f"not {params['api']!r}")
        if stream in self._live:
            raise InvalidParams(f"the model stream {stream} is already running")
        conversation = params.get("conversation")
        try:
            request = self.conversations.request(params)
        except InvalidParams:
            if conversation:
                self.conversations.forget(conversation)
            raise
        if request is None:
            log.info("model stream %s: conversation %s is not held at revision %s",
                     stream, conversation, params.get("since"))
            return {"stale": True}
        try:
            key = read_key(params.get("key_file"), params.get("key_env"))
        except ModelKeyError:
            if conversation:
                self.conversations.forget(conversation)
            raise
        out = _Out(self.link, stream)
        task = asyncio.create_task(self._run(out, DIALECTS[request.api], request, key),
                                   name=f"model stream {stream}")
        self._live[stream] = (task, out)

        def forget(done: asyncio.Task[None]) -> None:
            if self._live.get(stream, (None,))[0] is done:
                del self._live[stream]

        task.add_done_callback(forget)
        return {}

    async def cancel(self, params: ModelCancelParams) -> ModelCancelResult:
        """Cancel a stream: its response is closed, and it sends nothing more."""
        live = self._live.pop(params["stream"], None)
        if live is None or live[0].done():
            return {"cancelled": False}
        task, out = live
        out.close()
        task.cancel()
        await asyncio.wait({task}, timeout=2.0)
        return {"cancelled": True}

    async def close(self) -> None:
        """Cancel every stream and close the HTTP client."""
        for task, out in list(self._live.values()):
            out.close()
            task.cancel()
        tasks = [task for task, _ in self._live.values()]
        if tasks:
            await asyncio.wait(tasks, timeout=2.0)
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            import aiohttp  # the sidecar answers Emacs first; aiohttp loads with the first stream

            # No proxies, no .netrc: what reaches the model is what Emacs asked for.
            self._session = aiohttp.ClientSession(trust_env=False)
        return self._session

    async def _run(self, out: _Out, dialect: Dialect, request: ModelRequest,
                   key: str | None) -> None:
        log.info("model stream %s: %s %s, model %s", out.stream, request.api,
                 dialect.url(request.base_url), request.model)
        try:
            end = await self._exchange(out, dialect, request, key)
        except asyncio.CancelledError:
            out.close()
            log.info("model stream %s cancelled", out.stream)
            raise
        except Exception as err:
            log.exception("model stream %s failed", out.stream)
            end = _error(out.stream, "cut", f"internal error in the sidecar: {type(err).__name__}")
        for field in ("message", "body"):
            if field in end:
                end[field] = redact(str(end[field]), key)
        log.info("model stream %s ended: %s %s", out.stream, end["type"],
                 end.get("stop_reason") or end.get("message", ""))
        out.finish(end)

    async def _exchange(self, out: _Out, dialect: Dialect, request: ModelRequest,
                        key: str | None) -> ModelEventParams:
        import aiohttp

        url = dialect.url(request.base_url)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=request.timeout,
                                        sock_read=request.timeout)
        try:
            async with self._client().post(
                    url, data=orjson.dumps(dialect.body(request)),
                    headers=dialect.headers(key), timeout=timeout) as resp:
                if resp.status >= 300:
                    return await self._http_error(out, resp, key)
                kind = resp.headers.get("content-type", "")
                if "json" in kind or "html" in kind:
                    body = redact(await self._head(resp), key)
                    return _error(out.stream, "http", f"the model's server answered {kind}, "
                                  "not an event stream", resp.status, body)
                try:
                    return await self._read(out, resp, dialect.parser())
                except asyncio.CancelledError:
                    resp.close()
                    raise
        except aiohttp.ConnectionTimeoutError:
            return _error(out.stream, "timeout", f"could not connect to {url} within "
                          f"{request.timeout:g} s (connect timeout)")
        except (aiohttp.ServerTimeoutError, TimeoutError):
            return _error(out.stream, "timeout", f"no data from {url} for {request.timeout:g} s "
                          "(read timeout)")
        except aiohttp.ClientPayloadError as err:
            return _error(out.stream, "cut", f"the stream was cut short: {err}")
        except aiohttp.ClientConnectorError as err:
            return _error(out.stream, "cut", f"cannot connect to {url}: {err.strerror or err}")
        except aiohttp.ClientError as err:
            return _error(out.stream, "cut", f"the request to {url} failed: "
                          f"{type(err).__name__}: {err}")
        except (SseError, ValueError, AttributeError, TypeError) as err:
            return _error(out.stream, "malformed", f"the model's stream is malformed: "
                          f"{type(err).__name__}: {err}")

    @staticmethod
    async def _head(resp: aiohttp.ClientResponse) -> str:
        data = bytearray()
        while len(data) < ERROR_BODY_BYTES:
            chunk = await resp.content.read(ERROR_BODY_BYTES - len(data))
            if not chunk:
                break
            data += chunk
        return data.decode("utf-8", "replace")

    async def _http_error(self, out: _Out, resp: aiohttp.ClientResponse,
                          key: str | None) -> ModelEventParams:
        body = redact(await self._head(resp), key)
        reason = f" {resp.reason}" if resp.reason else ""
        return _error(out.stream, "http",
                      f"the model's server answered HTTP {resp.status}{reason}: "
                      f"{_detail(body)}", resp.status, body)

    async def _read(self, out: _Out, resp: aiohttp.ClientResponse,
                    parser: neutral.Parser) -> ModelEventParams:
        decoder = SseDecoder()
        unyielded = 0
        async for chunk in resp.content.iter_any():
            for name, data in decoder.feed(chunk):
                end = self._parts(out, parser.feed(name, data))
                if end is not None:
                    return end
            unyielded += len(chunk)
            if unyielded >= YIELD_BYTES:
                unyielded = 0
                await asyncio.sleep(0)
        for name, data in decoder.close():
            end = self._parts(out, parser.feed(name, data))
            if end is not None:
                return end
        end = self._parts(out, parser.finish())
        if end is not None:
            return end
        return _error(out.stream, "cut", "the stream was cut short: it ended before the model's "
                      "answer was complete")

    @staticmethod
    def _parts(out: _Out, parts: Iterable[Part]) -> ModelEventParams | None:
        """Send PARTS on; the end event if one of them ends the stream."""
        stream = out.stream
        for part in parts:
            if isinstance(part, Text):
                out.text(part.text)
            elif isinstance(part, Reasoning):
                out.text(part.text, "reasoning")
            elif isinstance(part, ThoughtEnd):
                out.flush()
                end: ModelEventParams = {"stream": stream, "type": "reasoning"}
                if part.signature:
                    end["signature"] = part.signature
                if part.redacted:
                    end["redacted"] = part.redacted
                out.send(end)
            elif isinstance(part, CallPart):
                out.flush()
                out.send({"stream": stream, "type": "tool_call", "id": part.id,
                          "name": part.name, "arguments": part.arguments})
            elif isinstance(part, Usage):
                out.flush()
                out.send({"stream": stream, "type": "usage", "input_tokens": part.input_tokens,
                          "output_tokens": part.output_tokens,
                          "cached_tokens": part.cached_tokens,
                          "cache_write_tokens": part.cache_write_tokens,
                          "reasoning_tokens": part.reasoning_tokens})
            elif isinstance(part, Done):
                return {"stream": stream, "type": "done", "stop_reason": part.stop_reason}
            elif isinstance(part, Failed):
                return _error(stream, "cut",
                              f"the model's server reported an error: {part.message}")
        return None

