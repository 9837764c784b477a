"""Every `M-x lispm…` command the README names exists after the README's own
set-up from a source checkout; test_package.py checks the installed package."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.conftest import EMACS, ROOT, offline


def readme_commands() -> list[str]:
    """The commands README.md tells the user to type after `M-x`."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return sorted(set(re.findall(r"M-x (lispm[a-z0-9-]*)", text)))


def commands_check(commands: list[str]) -> str:
    """Lisp that prints `missing NAME` for each of COMMANDS that is no command."""
    names = " ".join(commands)
    return (f"(dolist (command '({names}))"
            "  (princ (format \"%s %s\\n\" (if (commandp command) \"command\" \"missing\")"
            " command)))")


def test_readme_names_commands() -> None:
    commands = readme_commands()
    assert {"lispm", "lispm-apps", "lispm-doctor", "lispm-claude"} <= set(commands)


def test_readme_commands_exist_in_a_source_checkout(tmp_path: Path) -> None:
    commands = readme_commands()
    # As the README says: elisp/ on the load path, then (require 'lispm).
    script = ("(progn (require 'lispm) " + commands_check(commands) +
              # The apps load from the checkout when first called.
              " (dolist (command '(lispm-apps lispm-doctor lispm-mycin lispm-blocks))"
              "   (call-interactively command)"
              "   (princ (format \"opened %s %s\\n\" command (buffer-name (window-buffer)))))"
              " (lispm-sidecar-stop))")
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run(
        offline([EMACS, "--batch", "-Q", "-L", str(ROOT / "elisp"), "--eval", script]),
        cwd=tmp_path, env=dict(os.environ, HOME=str(home)), capture_output=True, text=True,
        timeout=120, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    missing = [line.split()[1] for line in output.splitlines() if line.startswith("missing ")]
    assert missing == [], output
    assert len([line for line in output.splitlines() if line.startswith("command ")]) == \
        len(commands)
    for command in ("lispm-apps", "lispm-doctor", "lispm-mycin", "lispm-blocks"):
        assert f"opened {command} *LispM" in output, output
