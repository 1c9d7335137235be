#!/usr/bin/env bash
# Installs the reference the benchmarks compare with, hermes-agent 0.19.0 with its ACP and MCP
# extras, in a virtualenv of its own (default /tmp/peer, where the benchmarks look for it).
# Usage: benchmarks/install_reference.sh [VENV]
# Then: .venv/bin/python benchmarks/acp_startup.py --reference-venv VENV (or export HERMES_REFERENCE_VENV=VENV)
set -euo pipefail
venv="${1:-/tmp/peer}"
python="${PYTHON:-python3}"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet 'hermes-agent[acp,mcp]==0.19.0'
"$venv/bin/hermes-acp" --version
echo "reference installed in $venv"
