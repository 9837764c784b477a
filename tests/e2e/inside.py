"""Run one end-to-end ERT file inside a loopback-only network namespace.

`pytest` calls this under `unshare --net` (see `harness.py`).  Here, with
only `lo` up, it starts the scripted model gateway, seeds a private HOME for
the real CLIs, and runs a batch Emacs with LispM and the ERT file.  It exits
with Emacs's exit status; the gateway's log stays in the work folder.

With `--tty`, Emacs runs in a terminal instead (`emacs -nw` on a
pseudo-terminal, see `run_tty`), so a test can type real keys: the ERT
file's Elisp side (lispm-e2e-tty.el) asks for each key with a file
`keys/NNN.key` in the work folder, holding the bytes to type; this writes
them to the terminal, notes when in `keys/NNN.sent` (Unix seconds) and
deletes the key file.  A terminal Emacs cannot print to stdout, so its ERT
runner writes what batch ERT would have printed (*Messages*, the summary
line included) to `tty-results.txt`, which this prints at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from lispm_sidecar.testing.sandbox import OPENCLAW_QUIET, openclaw_config, seed_home

ROOT = Path(__file__).resolve().parents[2]

#: The terminal Emacs runs on with `--tty`: its type, and its size (columns, rows).
TTY_TERM = "xterm-256color"
TTY_SIZE = (120, 40)
#: How often, in seconds, the key folder is looked at.
KEY_POLL = 0.005
#: How long the ERT runner may take to start (to write `TTY_STARTED`): a
#: terminal Emacs whose `-l` failed waits at its command loop, not exiting.
TTY_START_SECONDS = 60
TTY_STARTED = "tty-started"
TTY_RESULTS = "tty-results.txt"


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


def _drain(master: int, log: Path, crashed: threading.Event) -> None:
    """Copy what the terminal shows to LOG until it closes, so Emacs never
    blocks writing to it; set CRASHED once Emacs says it had a fatal error
    (it may then hang, in its handler of the fatal signal)."""
    tail = b""
    with open(log, "wb") as out:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every process closed the terminal
                return
            if not data:
                return
            out.write(data)
            tail = tail[-64:] + data
            if b"Fatal error " in tail:
                crashed.set()


def _type_keys(master: int, keys: Path) -> None:
    """Type the bytes of every key file waiting in KEYS, oldest first."""
    for key in sorted(keys.glob("*.key")):
        data = key.read_bytes()
        # Noted before the write: Emacs may run the key's command before
        # this process is scheduled again.
        sent = time.time()
        os.write(master, data)
        note = key.with_suffix(".sent-part")
        note.write_text(f"{sent:.6f}")
        note.rename(key.with_suffix(".sent"))
        key.unlink()


def screen_text(log: Path, size: int = 6000) -> str:
    """Return the end of the terminal output in LOG, escape sequences dropped."""
    if not log.exists():
        return "(no terminal output)"
    text = log.read_bytes()[-size * 4:].decode(errors="replace")
    text = re.sub(r"\x1b(\[[0-9;?>=]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-Za-z]|.)", " ", text)
    lines = (re.sub(r"[ \t]+", " ", line).strip() for line in text.splitlines())
    return "\n".join(line for line in lines if line)[-size:]


@dataclass(frozen=True)
class TtyRun:
    """How a program run by `run_tty` ended."""

    status: int | None
    """Its exit status, or None if it was killed."""
    killed: str = ""
    """Why it was killed."""


def run_tty(command: Sequence[str], cwd: Path, env: Mapping[str, str], work: Path,
            timeout: float, started: Path | None = None) -> TtyRun:
    """Run COMMAND on a pseudo-terminal of `TTY_SIZE`, typing the keys asked for
    under WORK/keys, until it exits.  It is killed if it outlives TIMEOUT
    seconds, if it says it had a fatal error (Emacs's "Fatal error N"), or if
    STARTED, when given, does not appear within `TTY_START_SECONDS`.  The
    terminal's output goes to WORK/tty-screen.log."""
    keys = work / "keys"
    keys.mkdir(parents=True, exist_ok=True)
    master, slave = os.openpty()
    columns, rows = TTY_SIZE
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    try:
        # setsid(1) makes a session whose controlling terminal is this one
        # (its stdin), so C-g there is SIGINT to Emacs, as in a real terminal;
        # not a group leader here, it does not fork: the session is Emacs's pid.
        process = subprocess.Popen(
            ["setsid", "--ctty", *command], cwd=cwd, env=dict(env, TERM=TTY_TERM),
            stdin=slave, stdout=slave, stderr=slave)
    finally:
        os.close(slave)
    crashed = threading.Event()
    reader = threading.Thread(target=_drain, args=(master, work / "tty-screen.log", crashed),
                              daemon=True)
    reader.start()
    start = time.monotonic()
    try:
        while process.poll() is None:
            waited = time.monotonic() - start
            killed = ""
            if waited > timeout:
                killed = f"it did not finish within {timeout:g} s"
            elif started is not None and waited > TTY_START_SECONDS and not started.exists():
                killed = f"its ERT runner did not start within {TTY_START_SECONDS} s"
            elif crashed.wait(0):
                try:
                    process.wait(3)
                    break
                except subprocess.TimeoutExpired:
                    killed = "it had a fatal error, and hung"
            if killed:
                stop_group(process)
                return TtyRun(None, killed)
            _type_keys(master, keys)
            time.sleep(KEY_POLL)
        return TtyRun(process.returncode)
    finally:
        if process.poll() is None:
            stop_group(process)
        reader.join(5)
        os.close(master)


def _emacs_command(emacs: str, ert: Path, tty: bool) -> list[str]:
    """Return the command line of the Emacs that runs the ERT file ERT."""
    load_path = ["-L", str(ROOT / "elisp"), "-L", str(ROOT / "elisp" / "apps"),
                 "-L", str(ROOT / "tests" / "e2e")]
    if tty:
        # The file's own runner writes TTY_RESULTS and exits (lispm-e2e-tty.el).
        return [emacs, "-nw", "-Q", *load_path, "-l", "ert", "-l", str(ert),
                "-f", "lispm-e2e-tty-run"]
    return [emacs, "--batch", "-Q", *load_path, "-l", "ert", "-l", str(ert),
            "-f", "ert-run-tests-batch-and-exit"]


def _run_emacs_tty(command: list[str], env: dict[str, str], work: Path, timeout: float) -> int:
    """Run the terminal Emacs COMMAND; print its results; return its exit status."""
    run = run_tty(command, ROOT, env, work, timeout, work / TTY_STARTED)
    results = work / TTY_RESULTS
    if results.exists():
        print(results.read_text(errors="replace"))
    if run.status != 0 or not results.exists():
        if run.killed:
            print(f"e2e: the terminal Emacs was killed: {run.killed}", file=sys.stderr)
        print(f"e2e: the terminal showed, at the end:\n{screen_text(work / 'tty-screen.log')}",
              file=sys.stderr)
    return 124 if run.status is None else run.status


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
    parser.add_argument("--tty", action="store_true",
                        help="run Emacs in a terminal, typing the keys the test asks for")
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
        command = _emacs_command(os.environ.get("EMACS", "emacs"), args.ert, args.tty)
        if args.tty:
            return _run_emacs_tty(command, env, args.work, args.timeout)
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
