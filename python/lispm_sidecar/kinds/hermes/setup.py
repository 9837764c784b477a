"""LispM's one-time Hermes setup: add the bridge to `~/.hermes/config.yaml`.

`M-x lispm-hermes-setup` runs `python -m lispm_sidecar.hermes_setup --hermes
HERMES` (the stable name of this module) with the sidecar's Python.  The
sidecar has no YAML library, Hermes depends on ruamel.yaml (pinned by
hermes-agent 0.19.0), so this module
re-runs itself with Hermes's own interpreter (from the `hermes` executable's
`#!` line), which parses the file with ruamel's round-trip loader, sets
`mcp_servers.lispm` and nothing else (comments, order and the style of the
rest are kept), and writes it back atomically with the file's own mode.
Hermes re-serialises the file itself (block lists, dropped quotes), so the
text is never matched: only the parsed mapping counts, and running the
setup again on an unchanged entry writes nothing.

A missing config file, one that is not valid YAML, or whose top level (or
`mcp_servers`) is not a mapping, is refused with a clear message and exit
code 1, and nothing is written.  Exit code 2: bad usage or no usable Hermes.

The entry::

    mcp_servers:
      lispm:
        command: /abs/sidecar/python
        args: [-m, lispm_sidecar.bridge]
        env:
          LISPM_MCP_URL: ${LISPM_MCP_URL}
          LISPM_MCP_TOKEN_FILE: ${LISPM_MCP_TOKEN_FILE}
          PYTHONPATH: /abs/folder/holding/lispm_sidecar
        timeout: 3600        # a LispM tool may wait for the user's approval
        connect_timeout: 60
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

OK, REFUSED, USAGE = 0, 1, 2

SERVER_NAME = "lispm"


def hermes_python(hermes: str) -> str:
    """The interpreter of the `hermes` executable HERMES, from its `#!` line."""
    path = Path(hermes)
    if os.sep not in hermes:
        found = next((Path(d) / hermes for d in os.environ.get("PATH", "").split(os.pathsep)
                      if d and os.access(Path(d) / hermes, os.X_OK)), None)
        if found is None:
            raise FileNotFoundError(f"cannot find {hermes!r} on PATH")
        path = found
    with open(path, "rb") as f:
        first = f.readline(4096).decode(errors="replace").strip()
    if not first.startswith("#!"):
        raise ValueError(f"{path} is not a Python script (no #! line)")
    words = first[2:].split()
    if words and os.path.basename(words[0]) == "env":
        words = words[1:]
    if not words:
        raise ValueError(f"{path} has an empty #! line")
    return words[0]


def entry(command: str, pythonpath: str) -> dict[str, Any]:
    """LispM's `mcp_servers` entry: the bridge, run by COMMAND (a Python)."""
    return {
        "command": command,
        "args": ["-m", "lispm_sidecar.bridge"],
        "env": {
            "LISPM_MCP_URL": "${LISPM_MCP_URL}",
            "LISPM_MCP_TOKEN_FILE": "${LISPM_MCP_TOKEN_FILE}",
            "PYTHONPATH": pythonpath,
        },
        "timeout": 3600,
        "connect_timeout": 60,
    }


def update(config: Path, command: str, pythonpath: str) -> str:
    """Set LispM's entry in CONFIG (needs ruamel.yaml); return what was done.

    Raises `SetupRefused` for a missing or malformed file, writing nothing."""
    import io

    from ruamel.yaml import YAML  # Hermes's own venv has it (a dependency of Hermes)
    from ruamel.yaml.error import YAMLError

    try:
        text = config.read_text(encoding="utf-8")
    except FileNotFoundError as err:
        raise SetupRefused(f"{config} does not exist: run `hermes setup` (or write its "
                           "model: section) first; nothing was written") from err
    except (OSError, UnicodeDecodeError) as err:
        raise SetupRefused(f"cannot read {config}: {err}; nothing was written") from err
    yaml = YAML()  # round-trip: comments, order and style of the rest stay
    yaml.preserve_quotes = True
    try:
        data = yaml.load(text)
    except YAMLError as err:
        raise SetupRefused(f"{config} is not valid YAML ({err}); nothing was written") from err
    if data is None:
        raise SetupRefused(f"{config} is empty: run `hermes setup` first; nothing was written")
    if not isinstance(data, dict):
        raise SetupRefused(f"{config} does not hold a mapping at its top level; "
                           "nothing was written")
    servers = data.get("mcp_servers")
    if servers is None:
        servers = data["mcp_servers"] = {}
    if not isinstance(servers, dict):
        raise SetupRefused(f"mcp_servers in {config} is not a mapping; nothing was written")
    wanted = entry(command, pythonpath)
    if _plain(servers.get(SERVER_NAME)) == wanted:
        return f"{config} already has LispM's bridge"
    verb = "replaced" if SERVER_NAME in servers else "added"
    servers[SERVER_NAME] = wanted
    buffer = io.StringIO()
    yaml.dump(data, buffer)
    temporary = config.with_name(f".{config.name}.lispm-{os.getpid()}")
    mode = config.stat().st_mode & 0o777
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(buffer.getvalue())
        os.replace(temporary, config)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return f"{verb} mcp_servers.{SERVER_NAME} in {config}"


def _plain(value: Any) -> Any:
    """VALUE (parsed YAML) as plain dicts, lists and scalars, for comparing."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value


class SetupRefused(Exception):
    """The config file cannot be updated; nothing was written."""


def default_config() -> Path:
    """`$HERMES_HOME/config.yaml`, else `~/.hermes/config.yaml`."""
    home = os.environ.get("HERMES_HOME")
    return Path(home) / "config.yaml" if home else Path.home() / ".hermes" / "config.yaml"


def main(argv: list[str] | None = None) -> int:
    """Run the setup; return the exit code."""
    parser = argparse.ArgumentParser(prog="python -m lispm_sidecar.hermes_setup",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--hermes", default="hermes", help="the hermes executable")
    parser.add_argument("--config", type=Path, help="Hermes's config.yaml")
    parser.add_argument("--command", help="the Python that runs the bridge "
                        "(default: this one)")
    parser.add_argument("--pythonpath", help="where lispm_sidecar is (default: this one's)")
    parser.add_argument("--in-hermes", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    config = args.config or default_config()
    command = args.command or sys.executable
    # lispm_sidecar/kinds/hermes/setup.py: the folder that holds lispm_sidecar.
    pythonpath = args.pythonpath or str(Path(__file__).resolve().parents[3])
    try:
        import ruamel.yaml  # noqa: F401
    except ImportError:
        if args.in_hermes:
            print("lispm hermes setup: Hermes's Python has no ruamel.yaml", file=sys.stderr)
            return USAGE
        try:
            python = hermes_python(args.hermes)
        except (OSError, ValueError) as err:
            print(f"lispm hermes setup: no usable Hermes: {err}", file=sys.stderr)
            return USAGE
        done = subprocess.run([python, str(Path(__file__).resolve()), "--in-hermes",
                               "--config", str(config), "--command", command,
                               "--pythonpath", pythonpath], check=False)
        return done.returncode
    try:
        print(update(config, command, pythonpath))
    except SetupRefused as err:
        print(f"lispm hermes setup: {err}", file=sys.stderr)
        return REFUSED
    return OK


if __name__ == "__main__":
    sys.exit(main())
