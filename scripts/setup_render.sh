#!/usr/bin/env bash
# Debian/Ubuntu libraries for headless MuJoCo rendering (ctrl_rl.sims.render, `ctrl-rl play --video`).
# Idempotent: installs only what is missing; as root directly, otherwise through sudo.
#   bash scripts/setup_render.sh            # EGL with Mesa's llvmpipe software rasterizer (default)
#   bash scripts/setup_render.sh --osmesa   # also OSMesa, the fallback where EGL cannot initialise
# EGL needs: libegl1 (glvnd loader; pulls libegl-mesa0, Mesa's EGL), libopengl0 (the GL dispatch
# PyOpenGL loads), libgl1-mesa-dri (Mesa's drivers, llvmpipe included). On an NVIDIA machine the
# driver's own EGL vendor library is used instead of Mesa's. Non-Debian systems: install the
# equivalents (e.g. mesa-libEGL) or set MUJOCO_GL yourself.
set -euo pipefail

packages=(libegl1 libopengl0 libgl1-mesa-dri)
for arg in "$@"; do
  case "$arg" in
    --osmesa) packages+=(libosmesa6) ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "setup_render: unknown argument '$arg' (use --osmesa or --help)" >&2; exit 2 ;;
  esac
done

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup_render: not a Debian-based system; install EGL + Mesa (or OSMesa) with your package manager" >&2
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup_render: headless GL libraries present (${packages[*]})"
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "setup_render: need root to install ${missing[*]}; run as root or install sudo" >&2
  exit 1
fi
echo "setup_render: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; then
  echo "setup_render: install failed; refreshing the package lists and retrying"
  "${sudo[@]}" apt-get update -q
  "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
echo "setup_render: done"
