#!/usr/bin/env bash
# Fresh machine -> the whole test suite (unit, conformance, learning and resume tests; ~5 min on 2 cores).
# Extra pytest arguments pass through, e.g. `bash scripts/test.sh -m "not slow"`.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q torch==2.13.0
.venv/bin/pip install -q -e ".[train,test,gymnasium,bench]"
.venv/bin/python -m pytest "$@"
