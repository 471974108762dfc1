#!/usr/bin/env bash
# Create or refresh .venv-ros: ROS 2 Kilted rclpy from PyPI wheels next to ctrl-rl[deploy] (no torch),
# for `--transport rclpy` (src/ctrl_rl/deploy/transports/ros2.py), the sim2sim bridge and tests/test_rclpy_transport.py.
# A separate venv because the ROS wheels install a .pth file (ros_wheels_bootstrapper) that re-execs every
# interpreter start with LD_LIBRARY_PATH set: it must never land in the training .venv.
# RMW: rmw_fastrtps_cpp (Fast DDS 3.2), the only RMW published as a wheel; ros-rclpy does not depend on it
# but fails to import without it (librmw_fastrtps_cpp.so not found), hence the explicit pin.
# Not on PyPI as wheels: ros-launch / ros-launch-ros (no `ros2 launch`), ros2cli, rmw_cyclonedds_cpp.
# ~45 s (no pip cache) and ~430 MB the first time; idempotent: a stamp of the pins and pyproject.toml makes a second run ~1 s.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-ros
ROS_PINS=(
  ros-rclpy==9.1.2 ros-rmw-fastrtps-cpp==9.3.3 ros-rcl-interfaces==2.3.0 ros-builtin-interfaces==2.3.0
  ros-std-msgs==5.5.1 ros-sensor-msgs==5.5.1 ros-geometry-msgs==5.5.1 ros-diagnostic-msgs==5.5.1 ros-lifecycle-msgs==2.3.0
)
EXTRA_PINS=(mujoco==4.0.0 "pyyaml>=6")  # the sim2sim bridge can run here too
stamp_of() { cat pyproject.toml scripts/setup_ros_env.sh | sha256sum | cut -d' ' -f1; }
want=$(stamp_of)
if [[ -x $VENV/bin/python && -f $VENV/.ctrl-rl-stamp && $(cat $VENV/.ctrl-rl-stamp) == "$want" ]] &&
    $VENV/bin/python -c "import rclpy, sensor_msgs.msg, diagnostic_msgs.msg, ctrl_rl" 2>/dev/null; then
  echo "setup_ros_env: $VENV is up to date"
  exit 0
fi
echo "setup_ros_env: building $VENV (rclpy 9.1.2 Kilted wheels, Fast DDS, ctrl-rl[deploy], no torch)"
[[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
rm -f "$VENV/.ctrl-rl-stamp"
"$VENV/bin/pip" install -q "${ROS_PINS[@]}" "${EXTRA_PINS[@]}" -e ".[deploy]"
"$VENV/bin/python" - <<'EOF'
import importlib.metadata as m
import importlib.util
import sys

if importlib.util.find_spec("torch") is not None:
    sys.exit("setup_ros_env: torch ended up in .venv-ros; the deploy extra must stay torch-free")
import ctrl_rl  # noqa: F401
import rclpy
from rclpy.utilities import get_rmw_implementation_identifier

ctx = rclpy.Context()
ctx.init([])
rmw = get_rmw_implementation_identifier()
ctx.try_shutdown()
print("setup_ros_env: ready:", *(f"{p} {m.version(p)}" for p in ("ros-rclpy", "numpy", "mujoco")), "rmw", rmw)
EOF
echo "$want" > "$VENV/.ctrl-rl-stamp"
