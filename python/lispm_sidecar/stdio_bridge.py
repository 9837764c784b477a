"""The stdio MCP bridge for Hermes and OpenClaw (`python -m lispm_sidecar.bridge`).

Hermes reads MCP servers only from `~/.hermes/config.yaml`, one entry for
every Hermes process, so LispM's entry (`mcp_servers.lispm`, written once
by `M-x lispm-hermes-setup`) runs this bridge, and each Hermes spawns its
own.  The entry names two variables, filled from Hermes's environment:

- `LISPM_MCP_URL`: the streamable-HTTP MCP endpoint of this terminal's agent;
- `LISPM_MCP_TOKEN_FILE`: the file (mode 0600) holding that server's token.

A LispM terminal sets both.  (An OpenClaw session's entry runs the bridge
through the sidecar's launcher `<runtime dir>/bin/lispm-bridge`, with both
in its `env`.)  The bridge forwards every JSON-RPC message it
reads on stdin (one per line) to that server with the bearer token, and
writes the answers to stdout; requests run concurrently, so a `ping` is
answered while a tool call waits for the user's approval in Emacs.

Outside LispM, Hermes hands the bridge the literal text `${LISPM_MCP_URL}`
(an unset variable is not expanded), or nothing.  The bridge then serves an
MCP server with no tools whose `instructions` say why, and exits when stdin
closes: Hermes starts normally, with no error.  The bridge logs to stderr
(Hermes's `logs/mcp-stderr.log`) only when something fails inside LispM.

Standard library only, so it starts fast.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from . import __version__

URL_VARIABLE = "LISPM_MCP_URL"
TOKEN_FILE_VARIABLE = "LISPM_MCP_TOKEN_FILE"

OUTSIDE = ("This Hermes runs outside LispM (no LispM terminal started it), so "
           "LispM's tools are not available here.")
DEFAULT_PROTOCOL = "2025-06-18"
#: How long requests under way may finish once stdin has closed.
FINISH_SECONDS = 5.0


def _unset(value: str | None) -> bool:
    """Whether VALUE means the variable was not set in Hermes's environment."""
    return not value or (value.startswith("${") and value.endswith("}"))


def target(environ: dict[str, str] | None = None) -> tuple[str, Path] | None:
    """The (url, token file) a LispM terminal gave, or None outside LispM."""
    env = os.environ if environ is None else environ
    url, token_file = env.get(URL_VARIABLE), env.get(TOKEN_FILE_VARIABLE)
    if _unset(url) or _unset(token_file):
        return None
    assert url is not None and token_file is not None
    path = Path(token_file)
    if not path.is_file():
        return None
    return url, path


class Output:
    """stdout, one JSON message a line, shared by the request threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n"
        with self._lock, contextlib.suppress(OSError, ValueError):  # Hermes is gone
            sys.stdout.write(data)
            sys.stdout.flush()


def _error(request_id: Any, code: int, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": text}}


def answer_outside(message: dict[str, Any]) -> dict[str, Any] | None:
    """The answer of the tool-less server to MESSAGE (None for a notification)."""
    if "id" not in message or "method" not in message:
        return None
    method, request_id = message["method"], message["id"]
    raw = message.get("params")
    params: dict[str, Any] = raw if isinstance(raw, dict) else {}
    if method == "initialize":
        return {"jsonrpc": "2.0", "id": request_id, "result": {
            "protocolVersion": str(params.get("protocolVersion") or DEFAULT_PROTOCOL),
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "lispm (outside LispM)", "version": __version__},
            "instructions": OUTSIDE}}
    if method == "tools/list":
        return {"jsonrpc": "2.0", "id": request_id, "result": {"tools": []}}
    if method == "ping":
        return {"jsonrpc": "2.0", "id": request_id, "result": {}}
    if method == "tools/call":
        return {"jsonrpc": "2.0", "id": request_id, "result": {
            "content": [{"type": "text", "text": OUTSIDE}], "isError": True}}
    return _error(request_id, -32601, f"method not found: {method}")


class Forwarder:
    """Forwards JSON-RPC messages to one agent's streamable-HTTP MCP server."""

    def __init__(self, url: str, token_file: Path) -> None:
        self.url = url
        self.token_file = token_file
        self.session: str | None = None
        self.protocol = DEFAULT_PROTOCOL
        self._initialize: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def _post(self, message: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
        token = self.token_file.read_text().strip()
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": self.protocol}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        request = urllib.request.Request(self.url, data=json.dumps(message).encode(),
                                         headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=3700) as resp:
                if session := resp.headers.get("mcp-session-id"):
                    self.session = session
                body = resp.read()
                content_type = resp.headers.get("content-type", "")
                status = resp.status
        except urllib.error.HTTPError as err:
            return err.code, None
        if not body.strip():
            return status, None
        if "text/event-stream" in content_type:
            data = [line[5:].strip() for line in body.decode().splitlines()
                    if line.startswith("data:")]
            body = data[-1].encode() if data else b"{}"
        answer = json.loads(body)
        return status, answer if isinstance(answer, dict) else None

    def forward(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Send MESSAGE on; return the server's answer (None for a notification)."""
        request_id = message.get("id")
        if message.get("method") == "initialize":
            self._initialize = message
            params = message.get("params")
            if isinstance(params, dict) and isinstance(params.get("protocolVersion"), str):
                self.protocol = params["protocolVersion"]
        try:
            status, answer = self._post(message)
            if status == 404 and self.session and self._initialize is not None:
                # The sidecar restarted (same port, same token): a new session.
                self._reinitialize()
                status, answer = self._post(message)
        except (OSError, ValueError) as err:
            print(f"lispm bridge: cannot reach {self.url}: {err}", file=sys.stderr)
            return None if request_id is None else _error(
                request_id, -32603, f"LispM's server for this terminal is unreachable: {err}")
        if request_id is None:
            return None
        if answer is None:
            print(f"lispm bridge: {self.url} answered HTTP {status}", file=sys.stderr)
            return _error(request_id, -32603, f"LispM's server answered HTTP {status}")
        answer["id"] = request_id
        if message.get("method") == "initialize":
            result = answer.get("result")
            if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str):
                self.protocol = result["protocolVersion"]
        return answer

    def _reinitialize(self) -> None:
        with self._lock:
            assert self._initialize is not None
            self.session = None
            self._post(dict(self._initialize, id="lispm-bridge-reinit"))
            self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})


def serve(stdin: Any = None) -> int:
    """Read messages from STDIN until it closes; return the exit code."""
    stream = sys.stdin if stdin is None else stdin
    out = Output()
    found = target()
    forwarder = Forwarder(*found) if found is not None else None
    running: list[threading.Thread] = []
    for line in stream:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            out.send(_error(None, -32700, "parse error"))
            continue
        if not isinstance(message, dict):
            out.send(_error(None, -32600, "invalid request"))
            continue
        if forwarder is None:
            answer = answer_outside(message)
            if answer is not None:
                out.send(answer)
            continue
        if message.get("method") == "initialize" or "id" not in message:
            # The handshake and notifications in order, before what follows.
            answer = forwarder.forward(message)
            if answer is not None:
                out.send(answer)
            continue

        def run(message: dict[str, Any] = message, fwd: Forwarder = forwarder) -> None:
            answer = fwd.forward(message)
            if answer is not None:
                out.send(answer)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        running = [t for t in running if t.is_alive()] + [thread]
    # stdin closed: Hermes is gone, or a client sent its last request.  Answer
    # what is under way, but wait no longer than FINISH_SECONDS for it.
    deadline = time.monotonic() + FINISH_SECONDS
    for thread in running:
        thread.join(max(0.0, deadline - time.monotonic()))
    return 0


def main() -> None:
    """The entry point: serve until Hermes closes stdin."""
    try:
        code = serve()
    except KeyboardInterrupt:
        code = 0
    sys.exit(code)


if __name__ == "__main__":
    main()
