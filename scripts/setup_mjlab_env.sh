#!/usr/bin/env bash
# Create or refresh .venv-mjlab: mjlab (Isaac Lab's manager-based API on MuJoCo Warp) next to
# ctrl-rl, for `ctrl-rl train sim=mjlab` and tests/test_isaaclab_adapter.py. A separate venv
# because mjlab pins mujoco~=3.11 while the main .venv has mujoco 4.0.
# Idempotent: a stamp of the pins and pyproject.toml makes a second run return in ~1 s.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-mjlab
CONSTRAINTS=scripts/mjlab-constraints.txt
stamp_of() { cat "$CONSTRAINTS" pyproject.toml scripts/setup_mjlab_env.sh | sha256sum | cut -d' ' -f1; }
want=$(stamp_of)
if [[ -x $VENV/bin/python && -f $VENV/.ctrl-rl-stamp && $(cat $VENV/.ctrl-rl-stamp) == "$want" ]] &&
    $VENV/bin/python -c "import mjlab, ctrl_rl" 2>/dev/null; then
  echo "setup_mjlab_env: $VENV is up to date"
  exit 0
fi
echo "setup_mjlab_env: building $VENV (torch==2.13.0 CPU, mjlab==1.6.0; a few minutes the first time)"
[[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
rm -f "$VENV/.ctrl-rl-stamp"
"$VENV/bin/pip" install -q -c "$CONSTRAINTS" torch==2.13.0
"$VENV/bin/pip" install -q -c "$CONSTRAINTS" mjlab==1.6.0 -e ".[train,test]"
"$VENV/bin/python" -c "import importlib.metadata as m, ctrl_rl; print('setup_mjlab_env: ready:',
    *(f'{p} {m.version(p)}' for p in ('mjlab', 'mujoco', 'torch')))"
echo "$want" > "$VENV/.ctrl-rl-stamp"
