#!/bin/sh
# Install what LispM needs from Debian, if it is missing: Emacs >= 29.1,
# vterm, tmux, iproute2 (for the loopback-only test namespace), venv and
# bubblewrap (the sandbox of run_lisp's program Emacs).
# Debian 12 gets Emacs 30 from bookworm-backports; Debian 13 from main.
# A second run finds everything and does nothing.
set -eu

emacs_ok() {
    command -v emacs >/dev/null 2>&1 &&
        emacs --batch -Q --eval '(kill-emacs (if (version<= "29.1" emacs-version) 0 1))' 2>/dev/null
}
vterm_ok() { ls -d /usr/share/emacs/site-lisp/elpa/vterm-* >/dev/null 2>&1; }
venv_ok() { python3 -c 'import ensurepip, venv' >/dev/null 2>&1; }

need=""
emacs_ok || need="$need emacs-nox"
vterm_ok || need="$need elpa-vterm"
command -v tmux >/dev/null 2>&1 || need="$need tmux"
command -v ip >/dev/null 2>&1 || need="$need iproute2"
command -v unshare >/dev/null 2>&1 || need="$need util-linux"
command -v bwrap >/dev/null 2>&1 || need="$need bubblewrap"
venv_ok || need="$need python3-venv"
[ -z "$need" ] && exit 0

if [ "$(id -u)" != 0 ]; then
    echo "LispM needs these Debian packages:$need (run this as root to install them)" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
release=""
[ -r /etc/os-release ] && release=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
target=""
if [ "$release" = bookworm ]; then
    # Emacs 30 and a vterm built for it come from backports; reuse the
    # first stanza of the stock sources so no host name is written here.
    sources=/etc/apt/sources.list.d/backports.sources
    if [ ! -e "$sources" ] && [ -r /etc/apt/sources.list.d/debian.sources ]; then
        awk 'BEGIN{RS="";ORS="\n\n"} NR==1' /etc/apt/sources.list.d/debian.sources |
            sed 's/^Suites:.*/Suites: bookworm-backports/' >"$sources"
    fi
    target="-t bookworm-backports"
fi
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q $target $need
emacs_ok || { echo "Emacs >= 29.1 could not be installed" >&2; exit 1; }
