"""A private home in which the real agent CLIs talk only to the scripted gateway.

The end-to-end tests and `make demo` run Claude Code and Codex with a
fresh HOME that this module seeds: onboarding done, the project folders
trusted, Codex, Hermes and OpenClaw pointed at the gateway as their model provider, and every
update check, telemetry and plugin fetch turned off.  The environment it
returns drops the caller's own model keys, so nothing reaches a real model.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import orjson

GATEWAY_KEY = "lispm-scripted-gateway"

_DROPPED_PREFIXES = ("ANTHROPIC_", "CLAUDE", "OPENAI_", "CODEX_", "TMUX", "HERMES_",
                     "OPENCLAW_")


def _toml_string(value: str) -> str:
    return orjson.dumps(value).decode()


def codex_config(gateway_url: str, projects: Iterable[Path]) -> str:
    """Return a Codex config.toml that starts straight at the composer."""
    lines = [
        'model = "fake-model"',
        'model_provider = "lispm-gateway"',
        "check_for_update_on_startup = false",
        "[analytics]",
        "enabled = false",
        "[features]",
        "plugins = false",
        "apps = false",
        "remote_plugin = false",
        "daemon_auto_start = false",
        "[model_providers.lispm-gateway]",
        'name = "LispM scripted gateway"',
        f"base_url = {_toml_string(gateway_url + '/v1')}",
        'wire_api = "responses"',
        'env_key = "LISPM_GATEWAY_KEY"',
    ]
    for project in projects:
        lines += [f"[projects.{_toml_string(str(project))}]", 'trust_level = "trusted"']
    return "\n".join(lines) + "\n"


def claude_state(projects: Iterable[Path]) -> bytes:
    """Return a ~/.claude.json with onboarding done and PROJECTS trusted."""
    return orjson.dumps(
        {
            "hasCompletedOnboarding": True,
            "projects": {str(p): {"hasTrustDialogAccepted": True} for p in projects},
        }
    )


def hermes_config(gateway_url: str) -> str:
    """Return a Hermes config.yaml with the gateway as its model (Chat Completions).

    Hermes's first-run wizard is skipped by writing the model section directly;
    LispM's bridge entry is added by `M-x lispm-hermes-setup`, as a user would."""
    url = _toml_string(gateway_url + "/v1")  # a JSON string is a YAML string too
    return (
        "model:\n"
        "  provider: custom\n"
        "  default: fake-model\n"
        f"  base_url: {url}\n"
        f"  api_key: {GATEWAY_KEY}\n"
        "  api_mode: chat_completions\n"
    )


def openclaw_config(gateway_url: str, workspace: Path,
                    gateway: dict[str, object] | None = None) -> bytes:
    """Return an openclaw.json with the gateway as its only model provider.

    Every background turn and outside call OpenClaw makes by default is off
    (heartbeat, skill workshop, cron, model catalog, update check, mDNS).
    Tool Search is left at its default, as a user has it (LispM switches it
    off while its sessions have tools there).  GATEWAY is the `gateway`
    section; none means LispM starts a Gateway of its own."""
    config: dict[str, object] = {
        "update": {"checkOnStart": False},
        "skills": {"workshop": {"autonomous": {"mode": "off"}}},
        "cron": {"enabled": False},
        "discovery": {"mdns": {"mode": "off"}},
        "models": {
            "mode": "replace", "catalogRefresh": {"enabled": False},
            "providers": {"fake": {
                "baseUrl": gateway_url + "/v1", "apiKey": GATEWAY_KEY,
                "api": "openai-completions",
                "models": [{"id": "fake-model", "name": "Fake Model", "reasoning": False,
                            "input": ["text"], "contextWindow": 131072, "maxTokens": 4096,
                            "cost": {"input": 0, "output": 0, "cacheRead": 0,
                                     "cacheWrite": 0}}]}},
        },
        "agents": {"defaults": {"model": {"primary": "fake/fake-model"},
                                "workspace": str(workspace),
                                "heartbeat": {"every": "0m"}}},
    }
    if gateway is not None:
        config["gateway"] = gateway
    return orjson.dumps(config, option=orjson.OPT_INDENT_2)


#: OpenClaw's switches for a machine that must not reach out.
OPENCLAW_QUIET = {"OPENCLAW_NO_AUTO_UPDATE": "1", "OPENCLAW_DISABLE_BONJOUR": "1",
                  "OPENCLAW_SKIP_CHANNELS": "1"}


def seed_home(
    home: Path, gateway_url: str, projects: Iterable[Path], base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Seed HOME for the CLIs and return the environment to run them with.

    PROJECTS are trusted by both CLIs (by their real paths).  BASE is the
    environment to start from (default: this process's), minus any model
    keys or CLI settings of the caller's own.
    """
    trusted = [Path(os.path.realpath(p)) for p in projects]
    home.mkdir(parents=True, exist_ok=True)
    (home / ".claude.json").write_bytes(claude_state(trusted))
    codex_home = home / ".codex"
    codex_home.mkdir(exist_ok=True)
    (codex_home / "config.toml").write_text(codex_config(gateway_url, trusted))
    hermes_home = home / ".hermes"
    hermes_home.mkdir(exist_ok=True)
    (hermes_home / "config.yaml").write_text(hermes_config(gateway_url))
    openclaw_home = home / ".openclaw"
    openclaw_home.mkdir(exist_ok=True)
    (openclaw_home / "openclaw.json").write_bytes(
        openclaw_config(gateway_url, home / "openclaw-workspace"))
    env = {
        key: value
        for key, value in (base if base is not None else os.environ).items()
        if not key.startswith(_DROPPED_PREFIXES)
    }
    # Codex makes its helpers' aliases (`codex-linux-sandbox`, which a
    # system bubblewrap older than 0.9 runs by name) only where CODEX_HOME
    # is outside the temporary folder; a HOME under /tmp needs its own.
    temporary = home / ".tmp"
    temporary.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        TMPDIR=str(temporary),
        ANTHROPIC_BASE_URL=gateway_url,
        ANTHROPIC_AUTH_TOKEN=GATEWAY_KEY,
        LISPM_GATEWAY_KEY=GATEWAY_KEY,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
        NO_UPDATE_NOTIFIER="1",
        **OPENCLAW_QUIET,
    )
    env.pop("XDG_RUNTIME_DIR", None)
    return env
