#!/usr/bin/env bash
# Fresh machine -> trained, evaluated and exported pendulum swing-up policy (a few minutes on 2 cores).
#   1. a virtual environment in .venv with the CPU build of torch and ctrl-rl (editable)
#   2. PPO on the batched torch pendulum (gymnasium Pendulum-v1 dynamics and reward)
#   3. 100 deterministic evaluation episodes (ends with a RESULT line)
#   4. logs/ppo/pendulum/<date_time>/exported/policy.onnx, parity-checked against torch
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q torch==2.13.0
.venv/bin/pip install -q -e ".[train]"
.venv/bin/ctrl-rl train task=pendulum
.venv/bin/ctrl-rl eval latest --episodes 100
.venv/bin/ctrl-rl export latest
