"""LispM's MCP client (python/lispm_sidecar/mcp_clients.py) under the official
conformance suite: `scripts/mcp-conformance-client URL`.

The suite starts a server for one scenario, runs this with its URL and the
scenario's name in MCP_CONFORMANCE_SCENARIO, and judges what it saw.  The
client does what the own agent would: declare the server, list its tools,
and call the one the scenario is about.
"""

from __future__ import annotations

import asyncio
import os
import sys

from lispm_sidecar.mcp_clients import McpClients

#: The tool each scenario calls, with its arguments; none for `initialize`.
CALLS: dict[str, tuple[str, dict[str, object]]] = {
    "tools_call": ("add_numbers", {"a": 5, "b": 3}),
    "sse-retry": ("test_reconnection", {}),
}


async def run(url: str, scenario: str) -> int:
    clients = McpClients(lambda server, reason: print(f"{server}: {reason}", file=sys.stderr))
    try:
        listed = await clients.declare({"servers": {"conformance": {"url": url}}, "timeout": 20})
        entry = listed["servers"][0]
        if "error" in entry:
            print(entry["error"], file=sys.stderr)
            return 1
        print("tools:", ", ".join(tool["name"] for tool in entry["tools"]))
        if scenario in CALLS:
            tool, arguments = CALLS[scenario]
            result = await clients.call({"server": "conformance", "tool": tool,
                                         "arguments": arguments, "timeout": 20})
            print(f"{tool}: {result['text']}")
            if result["is_error"]:
                return 1
        return 0
    finally:
        await clients.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(run(sys.argv[1], os.environ.get("MCP_CONFORMANCE_SCENARIO", ""))))
