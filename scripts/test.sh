#!/usr/bin/env bash
# Fresh machine -> the whole test suite (unit, conformance, learning, resume, MuJoCo, mjlab, ROS 2 and
# rendering tests; pytest ~34 min on 2 cores with two workers, 53 min in one process; plus the side venvs).
# Extra pytest arguments pass through, e.g. `bash scripts/test.sh -m "not slow"`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_render.sh  # headless GL libraries for the rendering tests (Debian; root or sudo)
python3 -m venv .venv
.venv/bin/pip install -q torch==2.13.0
.venv/bin/pip install -q -e ".[train,test,deploy,gymnasium,bench,video,mujoco,mjwarp]"
# Unitree Go1 / G1 models from mjlab's wheel (14 MB, no dependencies, nothing installed) into ~/.cache/ctrl_rl.
.venv/bin/ctrl-rl fetch-robots
# .venv-mjlab for tests/test_isaaclab_adapter.py (mjlab pins mujoco 3.11; quick when already built).
bash scripts/setup_mjlab_env.sh
# .venv-ros for the rclpy tests (ROS 2 Kilted wheels re-exec the interpreter: never in .venv; quick when built).
bash scripts/setup_ros_env.sh
# Two workers (pytest-xdist): most tests keep one core busy, so two at a time fill a 2-core machine; the
# deploy / DDS / ROS 2 tests stay one group on one worker, in order (tests/conftest.py).
# exec: pytest gets Ctrl-C and SIGTERM itself and stops the suite (no shell in between).
exec .venv/bin/python -m pytest -n 2 --dist loadgroup "$@"
