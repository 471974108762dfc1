#!/usr/bin/env bash
# mjlab for the GPU machine (issue 52: `benchmarks/gpu_suite.py --sections mjlab`). That machine has Python 3.12 with
# CUDA torch, numpy, scipy, onnx, tensorboard, ... and no package index; ../shared/tools/device_kit.sh carries our
# dependencies (.device: /tmp/site) and warp (.device-w1, .device-w2). mjlab 1.6 pins MuJoCo and MuJoCo Warp 3.11 and
# rsl-rl-lib 5.4.2, so it gets a target folder of its own, /tmp/site-mjlab, put in front of /tmp/site only for
# mjlab's process (it shares warp 1.19.0, tensordict and our package with /tmp/site).
#
# Run here, from anywhere in the project:   bash scripts/mjlab_kit.sh
# Needs .venv-mjlab (bash scripts/setup_mjlab_env.sh): the versions packed are the ones installed and tested there.
# Writes .mjlab-kit/ (git-ignored through .git/info/exclude): mjlab.tar.xz (mjlab's requirements that neither the
# GPU image nor .device has, for CPython 3.12 on x86-64 Linux, minus files the suite never runs: ffmpeg's and
# wandb's binaries, MuJoCo's experimental UI, jedi's typeshed, MuJoCo Warp's test data) and setup.sh.
# Wheels are kept in $MJLAB_KIT_CACHE (default ~/.cache/ctrl-rl/mjlab-kit); with them there a second run needs no
# network. On the GPU machine, in a call that carries .device and .mjlab-kit, after `. .device/setup.sh`:
#   . .mjlab-kit/setup.sh      # unpacks once per machine, exports CTRL_RL_MJLAB_PYTHONPATH for the suite
set -euo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
KIT=.mjlab-kit
CACHE=${MJLAB_KIT_CACHE:-$HOME/.cache/ctrl-rl/mjlab-kit}
VENV_PY=.venv-mjlab/bin/python
LIMIT_MB=${MJLAB_KIT_LIMIT_MB:-40}   # a call carries 64 MiB: the tree (~5 MB), .device (~16 MB) and this
[ -x "$VENV_PY" ] || { echo "mjlab_kit: needs $VENV_PY: run bash scripts/setup_mjlab_env.sh first" >&2; exit 1; }
mkdir -p .git/info "$KIT" "$CACHE"
grep -qx "/$KIT/" .git/info/exclude 2>/dev/null || echo "/$KIT/" >> .git/info/exclude

# On the GPU image (/work/.library/device/KINDS.md, "Python packages already there") or in .device: not packed.
# typing-extensions is packed all the same: pydantic and typeguard want a recent one, the image's is not pinned.
PRESENT="absl-py anyio certifi charset-normalizer click cloudpickle contourpy cycler etils filelock fonttools fsspec
grpcio h11 httpcore httpx idna imageio jinja2 kiwisolver markdown markdown-it-py markupsafe matplotlib mdurl ml-dtypes
mpmath networkx numpy onnx onnx-ir onnxscript packaging pillow protobuf psutil pygments pyparsing python-dateutil
pyyaml requests rich scipy setuptools sympy tensorboard tensorboard-data-server torch torchvision tqdm
urllib3 werkzeug wrapt xxhash
glfw gitpython gitdb smmap pyvers tensordict warp-lang"

# mjlab's requirements, transitively, at the versions .venv-mjlab holds, less the ones present there.
mapfile -t PINS < <(PRESENT="$PRESENT" "$VENV_PY" - <<'EOF'
import importlib.metadata as md, os, re
from packaging.requirements import Requirement

norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()  # noqa: E731
present, seen, todo = set(os.environ["PRESENT"].split()), {}, ["mjlab"]
while todo:
    name = norm(todo.pop())
    if name in seen:
        continue
    dist = md.distribution(name)
    seen[name] = dist.version
    reqs = (Requirement(r) for r in dist.requires or [])
    todo += [r.name for r in reqs if not r.marker or r.marker.evaluate({"extra": ""})]
print("\n".join(f"{n}=={v}" for n, v in sorted(seen.items()) if n not in present))
EOF
)
echo "mjlab_kit: ${#PINS[@]} packages beyond the GPU image and .device: ${PINS[*]}"

TARGET=(--python-version 3.12 --implementation cp --only-binary=:all: --platform manylinux_2_28_x86_64
        --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64 --platform manylinux_2_17_x86_64
        --platform manylinux2014_x86_64 --platform any)
pipq() { "$VENV_PY" -m pip -q --disable-pip-version-check "$@"; }
if pipq download --no-deps --no-index --find-links "$CACHE" -d "$CACHE" "${TARGET[@]}" "${PINS[@]}" 2>/dev/null; then
  echo "mjlab_kit: every wheel from $CACHE (offline)"
else
  pipq download --no-deps -d "$CACHE" "${TARGET[@]}" "${PINS[@]}"
fi

stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
pipq install --no-deps --no-index --no-compile --find-links "$CACHE" --target "$stage/site" "${TARGET[@]}" "${PINS[@]}"
(cd "$stage/site" && rm -rf bin imageio_ffmpeg/binaries/* wandb/bin/* mujoco/experimental jedi/third_party \
   mujoco_warp/test_data && find . -name __pycache__ -prune -exec rm -rf {} +)
tar -C "$stage/site" -cf - . | xz -T0 -6 > "$stage/mjlab.tar.xz"
size_mb=$(( $(stat -c %s "$stage/mjlab.tar.xz") / 1000000 ))
[ "$size_mb" -le "$LIMIT_MB" ] || { echo "mjlab_kit: the tarball is $size_mb MB, over $LIMIT_MB MB" >&2; exit 1; }
mv "$stage/mjlab.tar.xz" "$KIT/mjlab.tar.xz"
printf '%s\n' "${PINS[@]}" > "$KIT/pins.txt"

cat > "$KIT/setup.sh" <<'EOF'
# Sourced on the GPU machine from the project root, after `. .device/setup.sh`: `. .mjlab-kit/setup.sh`
if [ ! -f /tmp/site-mjlab/.unpacked ]; then
  rm -rf /tmp/site-mjlab && mkdir -p /tmp/site-mjlab
  xz -T0 -dc .mjlab-kit/mjlab.tar.xz | tar -x -C /tmp/site-mjlab && touch /tmp/site-mjlab/.unpacked
fi
export CTRL_RL_MJLAB_PYTHONPATH=/tmp/site-mjlab:/tmp/site
if out=$(PYTHONPATH=$CTRL_RL_MJLAB_PYTHONPATH python3 -c "import importlib.metadata as m, mjlab.tasks, ctrl_rl.sims.mjlab
print('mjlab kit:', *(f'{p} {m.version(p)}' for p in ('mjlab', 'mujoco', 'mujoco-warp', 'warp-lang', 'torch')))" 2>&1)
then echo "$out" | tail -1; else echo "mjlab kit: importing mjlab failed:"; echo "$out" | tail -8; fi
EOF

echo "mjlab_kit: wrote $KIT: $(du -sh "$KIT" | cut -f1) (mjlab.tar.xz ${size_mb} MB; unpacked $(du -sh "$stage/site" | cut -f1))"
du -sh .device .device-w1 .device-w2 2>/dev/null || echo "mjlab_kit: no .device yet: bash ../shared/tools/device_kit.sh --warp"
cat <<'EOF'
On the GPU machine, lease A of issue 52's plan: three calls back to back (a machine idle for ~30 s goes back; /tmp
stays while it is held), each ending with --json $OUT/<name>.json 2>&1 | tee $OUT/<name>.log:
  A1 carry [".device", ".device-w1"]:  . .device/setup.sh && nvidia-smi
  A2 carry [".device", ".device-w2"]:  . .device/setup.sh && python3 benchmarks/gpu_suite.py --sections physics ppo \
       newrobot --tasks quad --worlds 4096 --seconds 1.0 --options baseline cg it4 elliptic sap_tile \
       graph_conditional_off sensors_off warmstart_off --newrobot-seconds 120
  A3 carry [".device", ".mjlab-kit"]:  . .device/setup.sh && . .mjlab-kit/setup.sh && \
       python3 benchmarks/gpu_suite.py --sections mjlab --worlds 4096 16384 --seconds 1.0 --walk-seconds 60
Leases B-D and the minutes per call: benchmarks/gpu_suite.py's docstring, docs/experiments/benchmarks_gpu.md "Issue 52".
EOF
