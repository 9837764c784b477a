"""Run one end-to-end ERT file inside a loopback-only network namespace.

`pytest` calls this under `unshare --net` (see `harness.py`).  Here, with
only `lo` up, it starts the scripted model gateway, seeds a private HOME for
the real CLIs, and runs a batch Emacs with LispM and the ERT file.  It exits
with Emacs's exit status; the gateway's log stays in the work folder.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson

from lispm_sidecar.testing.sandbox import OPENCLAW_QUIET, openclaw_config, seed_home

ROOT = Path(__file__).resolve().parents[2]


def start_gateway(work: Path, script: Path | None) -> tuple[subprocess.Popen[bytes], str]:
    port_file = work / "gateway.port"
    command = [sys.executable, "-m", "lispm_sidecar.testing.gateway", "--port", "0",
               "--port-file", str(port_file), "--log", str(work / "gateway.jsonl")]
    if script is not None:
        command += ["--script", str(script)]
    log = open(work / "gateway.stderr", "wb")  # noqa: SIM115 - lives as long as the gateway
    gateway = subprocess.Popen(command, stdout=log, stderr=log,
                               env=dict(os.environ, PYTHONPATH=str(ROOT / "python")))
    deadline = time.monotonic() + 30
    while not (port_file.exists() and port_file.read_text().strip()):
        if gateway.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the gateway did not start: {(work / 'gateway.stderr').read_text()}")
        time.sleep(0.05)
    return gateway, f"http://127.0.0.1:{port_file.read_text().strip()}"


def wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path, what: str,
                  seconds: float) -> None:
    """Wait until PROCESS listens on PORT; exit showing LOG if it dies or takes
    longer than SECONDS."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                output = log.read_text(errors="replace")
                raise SystemExit(f"{what} did not start: {output}") from None
            time.sleep(0.05)


def start_holon(work: Path, env: dict[str, str], gateway: str) -> tuple[subprocess.Popen[bytes],
                                                                         dict[str, str]]:
    """Start the Holon stand-in daemon; return it and the variables that name it.

    A `holon` script on PATH runs the stand-in (as the real `holon` would
    run); the daemon's commands find `lispm-tool` where the sidecar writes
    its launcher, `$LISPM_RUNTIME_DIR/bin`.
    """
    bin_dir = work / "holon-bin"
    bin_dir.mkdir(exist_ok=True)
    holon = bin_dir / "holon"
    holon.write_text(f"#!/bin/sh\nexec {sys.executable} -m lispm_sidecar.testing.holon_standin "
                     '"$@"\n')
    holon.chmod(0o755)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    names = {"HOLON_HOME": str(work / "holon-home"), "HOLON_HTTP_ADDR": f"127.0.0.1:{port}"}
    daemon_env = dict(env, **names, HOLON_OPENAI_BASE_URL=f"{gateway}/v1",
                      OPENAI_API_KEY="lispm-e2e",
                      PATH=f"{work / 'run' / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}")
    log = open(work / "holon.log", "wb")  # noqa: SIM115 - lives as long as the daemon
    daemon = subprocess.Popen([str(holon), "serve"], stdout=log, stderr=log, env=daemon_env)
    wait_for_port(port, daemon, work / "holon.log", "holon", 30)
    return daemon, dict(names, PATH=f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}")


def start_remote_openclaw(work: Path, env: dict[str, str], gateway: str,
                          ) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    """Start an OpenClaw Gateway that plays a remote one, with a state of its own.

    It runs real OpenClaw as another machine would: its own state folder,
    port and token, its model the scripted gateway.  The user's config
    (HOME's openclaw.json) is switched to remote mode, naming it; the
    Gateway cannot reach this LispM's MCP servers (it never gets them)."""
    state = work / "remote-openclaw"
    state.mkdir(exist_ok=True)
    token = "remote-" + os.urandom(16).hex()
    port = 18801
    (state / "openclaw.json").write_bytes(openclaw_config(
        gateway, work / "remote-workspace",
        {"mode": "local", "port": port, "bind": "loopback",
         "auth": {"mode": "token", "token": token}}))
    home_config = Path(env["HOME"]) / ".openclaw" / "openclaw.json"
    config = orjson.loads(home_config.read_bytes())
    config["gateway"] = {"mode": "remote",
                         "remote": {"url": f"ws://127.0.0.1:{port}", "token": token}}
    home_config.write_bytes(orjson.dumps(config, option=orjson.OPT_INDENT_2))
    log = open(work / "remote-openclaw.log", "wb")  # noqa: SIM115 - lives as long as it
    program = Path(env["LISPM_OPENCLAW_BIN"]) / "openclaw"
    daemon = subprocess.Popen([str(program), "gateway", "run"], stdout=log, stderr=log,
                              env=dict(env, OPENCLAW_STATE_DIR=str(state), **OPENCLAW_QUIET),
                              start_new_session=True)
    wait_for_port(port, daemon, work / "remote-openclaw.log", "the remote OpenClaw Gateway", 90)
    return daemon, {"LISPM_E2E_OPENCLAW_REMOTE": f"ws://127.0.0.1:{port}"}


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """Stop PROCESS and its process group (a Gateway drains for minutes on
    SIGTERM alone)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(3)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--ert", type=Path, required=True)
    parser.add_argument("--script", type=Path)
    parser.add_argument("--project", action="append", default=[], type=Path)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--holon", action="store_true", help="also run the Holon stand-in")
    parser.add_argument("--openclaw-remote", action="store_true",
                        help="also run an OpenClaw Gateway that plays a remote one")
    args = parser.parse_args()
    gateway, url = start_gateway(args.work, args.script)
    daemon: subprocess.Popen[bytes] | None = None
    remote: subprocess.Popen[bytes] | None = None
    try:
        env = seed_home(args.work / "home", url, args.project)
        npm_bin = os.environ.get("LISPM_NPM_BIN", str(ROOT / ".deps/npm/node_modules/.bin"))
        openclaw_bin = os.environ.get("LISPM_OPENCLAW_BIN",
                                      str(ROOT / ".deps/openclaw/node_modules/.bin"))
        env.update(
            PATH=f"{npm_bin}:{openclaw_bin}:{env.get('PATH', '/usr/bin:/bin')}",
            LISPM_OPENCLAW_BIN=openclaw_bin,
            LISPM_E2E_DIR=str(args.work),
            LISPM_E2E_GATEWAY=url,
            LISPM_RUNTIME_DIR=str(args.work / "run"),
            PYTHONPATH=str(ROOT / "python"),
        )
        if args.holon:
            daemon, holon_env = start_holon(args.work, env, url)
            env.update(holon_env, LISPM_E2E_HOLON=holon_env["HOLON_HTTP_ADDR"])
        if args.openclaw_remote:
            remote, remote_env = start_remote_openclaw(args.work, env, url)
            env.update(remote_env)
        emacs = os.environ.get("EMACS", "emacs")
        command = [emacs, "--batch", "-Q", "-L", str(ROOT / "elisp"),
                   "-L", str(ROOT / "elisp" / "apps"), "-L", str(ROOT / "tests" / "e2e"),
                   "-l", "ert", "-l", str(args.ert), "-f", "ert-run-tests-batch-and-exit"]
        try:
            done = subprocess.run(command, cwd=ROOT, env=env, timeout=args.timeout, check=False)
        except subprocess.TimeoutExpired:
            print(f"e2e: Emacs did not finish within {args.timeout:g} s", file=sys.stderr)
            return 124
        return done.returncode
    finally:
        if remote is not None:
            stop_group(remote)
        for process in (daemon, gateway):
            if process is None:
                continue
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()


if __name__ == "__main__":
    sys.exit(main())
