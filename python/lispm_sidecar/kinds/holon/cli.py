"""`lispm-tool`: LispM's seven tools for agents that have no MCP client.

A Holon agent runs shell commands, and every command it runs has
`HOLON_AGENT_ID` in its environment.  `lispm-tool` finds that agent's
LispM server through the registry the sidecar keeps (a file only the user
can read), and calls the tool over plain HTTP with the agent's own token.
It imports only the standard library, so it starts fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, NoReturn

from ...runtime import runtime_root

#: Exit codes.
OK, TOOL_ERROR, USAGE, NOT_AN_AGENT, REFUSED = 0, 1, 2, 3, 4

REGISTRY_NAME = "holon-agents.json"

EPILOG = """\
examples:
  lispm-tool list_agents
  lispm-tool send_message --to claude "The build is green."
  lispm-tool ask_agent --to claude "Please review [[file:/abs/notes.el::9]]."
  lispm-tool ask_agent --role reviewer "Review [[file:/abs/notes.el::9]]."
  lispm-tool reply --request R1 "It crashes on a line with no colon."
  lispm-tool search_tools "edit file"
  lispm-tool skill NAME
  lispm-tool call_tool read_file --args '{"path": "notes.el"}'
  echo "a long text" | lispm-tool send_message --to codex -

A TEXT of "-" (or none) is read from standard input.  Messages from other
agents reach you as your next prompt, headed [Message from NAME],
[Request R1 from NAME] (answer it with `lispm-tool reply`) or
[Reply from NAME to request R1].

output: the tool's text; with --json one JSON object
  {"ok": true|false, "tool": NAME, "text": TEXT, "result": STRUCTURED|null}.

exit codes:
  0  the tool ran
  1  the tool refused or failed (its message is printed)
  2  bad usage
  3  not inside a LispM Holon agent: HOLON_AGENT_ID is unset, names no
     agent LispM serves, or that agent's server is gone
  4  the agent's server refused the token (the agent was closed or restarted)
"""


class Failure(Exception):
    """An error with its exit code."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code = code


def registry_path() -> Path:
    """The registry of the Holon agents LispM serves."""
    return runtime_root() / REGISTRY_NAME


def find_agent(agent_id: str | None) -> tuple[str, str]:
    """The (url, token) of the LispM server of Holon agent AGENT_ID."""
    if not agent_id:
        raise Failure(NOT_AN_AGENT, "HOLON_AGENT_ID is not set: lispm-tool works only in a "
                      "command run by a Holon agent that LispM started")
    path = registry_path()
    try:
        registry = json.loads(path.read_text())
    except FileNotFoundError:
        registry = {}
    except (OSError, ValueError) as err:
        raise Failure(NOT_AN_AGENT, f"cannot read LispM's registry {path}: {err}") from err
    entry = (registry.get("agents") or {}).get(agent_id) if isinstance(registry, dict) else None
    if not isinstance(entry, dict):
        raise Failure(NOT_AN_AGENT, f"no Holon agent {agent_id!r} is open in LispM "
                      f"(registry {path})")
    try:
        token = Path(entry["token_file"]).read_text().strip()
    except (KeyError, OSError) as err:
        raise Failure(NOT_AN_AGENT, f"the LispM server of {agent_id} is gone: {err}") from err
    return str(entry["url"]), token


class Client:
    """A minimal MCP client over streamable HTTP (JSON responses)."""

    def __init__(self, url: str, token: str, agent_id: str) -> None:
        self.url = url
        self.token = token
        self.agent_id = agent_id
        self.session: str | None = None
        self.next_id = 1

    def _post(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": "2025-06-18"}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        request = urllib.request.Request(self.url, data=json.dumps(payload).encode(),
                                         headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=3700) as resp:
                self.session = resp.headers.get("mcp-session-id") or self.session
                body = resp.read()
                content_type = resp.headers.get("content-type", "")
        except urllib.error.HTTPError as err:
            if err.code in (401, 403):
                raise Failure(REFUSED, f"LispM refused the token of {self.agent_id} "
                              f"(HTTP {err.code}): the agent was closed or restarted") from err
            raise Failure(TOOL_ERROR, f"LispM's server answered HTTP {err.code}: "
                          f"{err.read().decode(errors='replace')[:500]}") from err
        except (urllib.error.URLError, OSError) as err:
            raise Failure(NOT_AN_AGENT, f"cannot reach the LispM server of {self.agent_id} "
                          f"at {self.url}: {err}") from err
        if not body.strip():
            return None
        if "text/event-stream" in content_type:
            data = [line[5:].strip() for line in body.decode().splitlines()
                    if line.startswith("data:")]
            body = data[-1].encode() if data else b"{}"
        answer = json.loads(body)
        if "error" in answer:
            raise Failure(TOOL_ERROR, str(answer["error"].get("message", answer["error"])))
        result = answer.get("result")
        return result if isinstance(result, dict) else {}

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Call METHOD; return its result."""
        self.next_id += 1
        return self._post({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                           "params": params}) or {}

    def initialize(self) -> None:
        """The MCP handshake."""
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "lispm-tool", "version": "1"}})
        self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="lispm-tool", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Call LispM's tools from a Holon agent's shell: talk to the other agents "
                    "in the user's Emacs, and use LispM's tools and skills.",
        epilog=EPILOG)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    sub = parser.add_subparsers(dest="tool", metavar="TOOL", required=True)

    def tool(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                       help="print one JSON object")
        return p

    tool("list_agents", "list the live agents (name, kind, folder, state), which is you, "
                        "and the roles a helper can be started from")
    p = tool("send_message", "send another agent a message; returns at once")
    p.add_argument("--to", required=True, help="the other agent's name, e.g. claude")
    p.add_argument("text", nargs="?", default="-", help="the message (- or none: stdin)")
    p = tool("ask_agent", "ask another agent, or a new helper of a role; its answer comes "
                          "later as your next prompt")
    whom = p.add_mutually_exclusive_group(required=True)
    whom.add_argument("--to", help="the other agent's name, e.g. claude")
    whom.add_argument("--role", help="a role's name, e.g. reviewer: a helper of it is started, "
                                     "answers, and retires")
    p.add_argument("text", nargs="?", default="-", help="the request (- or none: stdin)")
    p = tool("reply", "answer a request you were sent ([Request R1 from NAME])")
    p.add_argument("--request", required=True, help="the request id, e.g. R1")
    p.add_argument("text", nargs="?", default="-", help="your answer (- or none: stdin)")
    p = tool("search_tools", "find LispM's tools and skills by words")
    p.add_argument("query")
    p = tool("skill", "learn one of LispM's skills")
    p.add_argument("name")
    p = tool("call_tool", "run one of LispM's tools in your folder, under the user's policy")
    p.add_argument("name")
    p.add_argument("--args", default="{}", help="the tool's arguments, a JSON object")
    return parser


def _text(value: str) -> str:
    return sys.stdin.read() if value == "-" else value


def tool_call(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The tool's name and arguments from the command line."""
    name = args.tool
    if name == "send_message":
        return name, {"to": args.to, "text": _text(args.text)}
    if name == "ask_agent":
        whom = {"to": args.to} if args.to is not None else {"role": args.role}
        return name, {**whom, "request": _text(args.text)}
    if name == "reply":
        return name, {"request": args.request, "text": _text(args.text)}
    if name == "search_tools":
        return name, {"query": args.query}
    if name == "skill":
        return name, {"name": args.name}
    if name == "call_tool":
        try:
            tool_args = json.loads(args.args)
        except ValueError as err:
            raise Failure(USAGE, f"--args is not JSON: {err}") from err
        if not isinstance(tool_args, dict):
            raise Failure(USAGE, "--args must be a JSON object")
        return name, {"name": args.name, "args": tool_args}
    return name, {}


def run(argv: list[str] | None = None) -> int:
    """Run the command line ARGV; return the exit code."""
    args = build_parser().parse_args(argv)
    as_json = bool(args.json)
    try:
        name, tool_args = tool_call(args)
        agent_id = os.environ.get("HOLON_AGENT_ID")
        url, token = find_agent(agent_id)
        client = Client(url, token, agent_id or "")
        client.initialize()
        result = client.request("tools/call", {"name": name, "arguments": tool_args})
    except Failure as failure:
        _fail(failure, as_json, args.tool)
    text = "\n".join(str(part.get("text", "")) for part in result.get("content") or []
                     if isinstance(part, dict) and part.get("type") == "text")
    ok = not result.get("isError")
    if as_json:
        print(json.dumps({"ok": ok, "tool": name, "text": text,
                          "result": result.get("structuredContent")}, ensure_ascii=False))
    else:
        print(text, file=sys.stdout if ok else sys.stderr)
    return OK if ok else TOOL_ERROR


def _fail(failure: Failure, as_json: bool, tool: str) -> NoReturn:
    if as_json:
        print(json.dumps({"ok": False, "tool": tool, "text": str(failure), "result": None,
                          "exit": failure.code}))
    print(f"lispm-tool: {failure}", file=sys.stderr)
    sys.exit(failure.code)


def main() -> None:
    """The console entry point."""
    sys.exit(run())


if __name__ == "__main__":
    main()
