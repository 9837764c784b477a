"""The entry points users' configs and installs name keep working by their old names."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "lispm_sidecar"
#: The entry points of earlier versions, and the modules that do the work.
SHIMS = {"bridge": "stdio_bridge", "hermes_setup": "kinds.hermes.setup",
         "lispm_tool": "kinds.holon.cli"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "0"}}}


def run(argv: list[str], tmp_path: Path, stdin: bytes = b"",
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("LISPM_MCP", "HOLON_AGENT_ID"))}
    return subprocess.run(argv, input=stdin, capture_output=True, timeout=60, check=False,
                          cwd=tmp_path, env=dict(clean, PYTHONPATH=str(ROOT / "python"),
                                                 LISPM_RUNTIME_DIR=str(tmp_path / "run"),
                                                 **(env or {})))


def test_each_shim_is_tiny_and_re_exports_its_module() -> None:
    for shim, module in SHIMS.items():
        body = ast.parse((PACKAGE / f"{shim}.py").read_text()).body
        imports = [(node.level, node.module, [a.name for a in node.names])
                   for node in body if isinstance(node, ast.ImportFrom)]
        assert imports == [(1, module, ["main"])], shim
        others = [node for node in body if not isinstance(node, ast.ImportFrom)]
        assert isinstance(others[0], ast.Expr), f"{shim} has no docstring"
        assert isinstance(others[-1], ast.If), f"{shim} does not end in its __main__ test"
        assert ast.unparse(others[-1].test) == "__name__ == '__main__'", shim
        assert all(isinstance(node, ast.Import | ast.Assign) for node in others[1:-1]), shim
        assert len(ast.unparse(others[-1]).splitlines()) <= 2, shim


def test_the_bridge_runs_by_its_old_name(tmp_path: Path) -> None:
    done = run([sys.executable, "-m", "lispm_sidecar.bridge"], tmp_path,
               stdin=orjson.dumps(INIT) + b"\n")
    assert (done.returncode, done.stderr) == (0, b"")
    answer = orjson.loads(done.stdout.splitlines()[0])
    assert "outside LispM" in answer["result"]["instructions"]


def test_the_hermes_setup_runs_by_its_old_name_and_re_runs_its_file(tmp_path: Path) -> None:
    # A "Hermes" whose Python records how the setup re-runs itself in it.
    record = tmp_path / "argv.json"
    python = tmp_path / "hermes-python"
    python.write_text(f"#!{sys.executable}\nimport json, sys\n"
                      f"open({str(record)!r}, 'w').write(json.dumps(sys.argv[1:]))\n")
    python.chmod(0o755)
    hermes = tmp_path / "hermes"
    hermes.write_text(f"#!{python}\n")
    hermes.chmod(0o755)
    config = tmp_path / "config.yaml"
    done = run([sys.executable, "-m", "lispm_sidecar.hermes_setup", "--hermes", str(hermes),
                "--config", str(config)], tmp_path)
    assert done.returncode == 0, done.stderr
    argv = orjson.loads(record.read_bytes())
    assert argv[0] == str(PACKAGE / "kinds" / "hermes" / "setup.py")
    assert argv[1:] == ["--in-hermes", "--config", str(config), "--command", sys.executable,
                        "--pythonpath", str(PACKAGE.parent)]


def test_lispm_tool_runs_by_its_old_module_and_its_console_script(tmp_path: Path) -> None:
    scripts = tomllib.loads((ROOT / "python" / "pyproject.toml").read_text())["project"][
        "scripts"]
    module, _, function = scripts["lispm-tool"].partition(":")
    for argv in ([sys.executable, "-m", "lispm_sidecar.lispm_tool", "list_agents"],
                 [sys.executable, "-c", f"from {module} import {function}; {function}()",
                  "list_agents"]):
        done = run(argv, tmp_path, env={"HOLON_AGENT_ID": "nobody"})
        assert done.returncode == 3, done.stderr
        assert b"no Holon agent 'nobody' is open in LispM" in done.stderr
